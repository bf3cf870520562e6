"""A live Harbor task for one training episode, through Harbor's own environment and verifier.

`task_starter(backend)` returns `async (task_dir) -> LiveHarborTask`: the task's environment started
with our Harbor custom environment for that backend (the same classes `harbor run` and our trials
use: image built and cached, no network, /logs folders), so the episode's shell is a persistent
shell in that sandbox. `verify()` then runs Harbor's `Verifier` exactly as a Harbor trial does:
tests uploaded to /tests only now, stale reward files removed, test.sh run as the verifier user
under its timeout, reward.json read before reward.txt.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

from autoenvscaling.tools.sandbox.base import Sandbox, SandboxError
from autoenvscaling.tools.sandbox.harbor_env import ENVIRONMENTS
from autoenvscaling.training.episode_env import StartTask

# Backends whose Harbor environment exposes a live `Sandbox` (for the persistent shell).
ENVIRONMENT_IMPORT_PATHS = ENVIRONMENTS


class VerifierError(RuntimeError):
    """The verifier ran but gave no valid reward (no reward file, unparsable, timed out)."""


class LiveHarborTask:
    """One started task environment: `sandbox` for the agent, `verify()` once, `close()`."""

    def __init__(self, task: Any, environment: Any, trial_dir: Path) -> None:
        self.task = task
        self.environment = environment
        self.trial_dir = trial_dir

    @property
    def sandbox(self) -> Sandbox:
        return self.environment.sandbox

    async def verify(self) -> float:
        from harbor.models.trial.config import VerifierConfig
        from harbor.models.trial.paths import TrialPaths
        from harbor.verifier.factory import VerifierFactory

        vcfg = self.task.config.verifier
        with self.environment.with_default_user(vcfg.user):
            verifier = VerifierFactory.create_verifier_from_config(
                VerifierConfig(),
                task=self.task,
                trial_paths=TrialPaths(trial_dir=self.trial_dir),
                environment=self.environment,
                override_env=vcfg.env or None,
            )
            try:
                result = await asyncio.wait_for(verifier.verify(), vcfg.timeout_sec)
            except TimeoutError:
                raise VerifierError(f"verifier timed out after {vcfg.timeout_sec:.0f}s") from None
            except Exception as exc:
                raise VerifierError(f"{type(exc).__name__}: {exc}") from exc
        rewards = result.rewards or {}
        if not rewards:
            raise VerifierError("the verifier reported no rewards")
        return float(rewards.get("reward", next(iter(rewards.values()))))

    async def close(self) -> None:
        try:
            await self.environment.stop(delete=True)
        finally:
            shutil.rmtree(self.trial_dir, ignore_errors=True)


def task_starter(backend: str) -> StartTask:
    """`async (task_dir) -> LiveHarborTask` for an engine ('podman' or 'docker')."""
    import_path = ENVIRONMENT_IMPORT_PATHS.get(backend)  # type: ignore[call-overload]
    if import_path is None:
        raise SandboxError(
            f"training episodes need a backend with a live shell: one of "
            f"{sorted(ENVIRONMENT_IMPORT_PATHS)}, not {backend!r}"
        )

    async def start(task_dir: Path) -> LiveHarborTask:
        os.environ.setdefault("HARBOR_TELEMETRY", "0")
        from harbor.environments.factory import EnvironmentFactory
        from harbor.models.task.task import Task
        from harbor.models.trial.config import EnvironmentConfig
        from harbor.models.trial.paths import TrialPaths

        task = Task(task_dir=Path(task_dir))
        trial_dir = Path(tempfile.mkdtemp(prefix=f"aes-episode-{task.short_name}-"))
        paths = TrialPaths(trial_dir=trial_dir)
        paths.mkdir()
        environment = EnvironmentFactory.create_environment_from_config(
            config=EnvironmentConfig(import_path=import_path),
            environment_dir=task.paths.environment_dir,
            environment_name=task.short_name,
            session_id=f"train-{uuid.uuid4().hex[:12]}",
            trial_paths=paths,
            task_env_config=task.config.environment,
        )
        live = LiveHarborTask(task, environment, trial_dir)
        try:
            await environment.start(force_build=False)
            await environment.run_healthcheck()
        except BaseException:
            await live.close()
            raise
        return live

    return start
