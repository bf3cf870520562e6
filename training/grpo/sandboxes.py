"""A live Harbor task for one training episode, through Harbor's own environment and verifier.

`task_starter(backend, options)` returns `async (task_dir) -> LiveHarborTask`: the task's
environment started with our Harbor custom environment for that backend (the same classes `harbor
run` and our trials use: image built and cached, no network, /logs folders), so the episode's
shell is a persistent shell in that sandbox; or, for `harbor:<type>`, Harbor's own environment of
that type (the `EnvironmentConfig` tools/sandbox/harbor_backends.py builds, options passed through), with
the shell over its `exec` (tools/sandbox/exec_shell.py). `verify()` then runs the task's verifier by the same protocol as a Harbor
trial (`tools/trials/verifier.run_verifier`): separate mode (the default) copies the agent's
work into a fresh container of the task's image, shared mode kills the agent's processes first;
tests uploaded to /tests only now, stale reward files removed, test.sh run as the verifier user
under its timeout, reward.json read before reward.txt.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import docker.errors
from harbor.environments.factory import EnvironmentFactory
from harbor.models.task.task import Task
from harbor.models.trial.paths import TrialPaths

from ...tools.sandbox import engine
from ...tools.sandbox.base import Sandbox, SandboxError
from ...tools.sandbox.exec_shell import ExecShell
from ...tools.sandbox.harbor_backends import (
    ENVIRONMENTS,
    HarborBackendError,
    check_stages,
    environment_config,
    is_harbor_type,
)
from ...tools.trials.faults import NoRewardError, RewardOutOfRangeError, reward_problem
from ...tools.trials.verifier import VerifierRunError, run_verifier
from .episode_env import StartTask


class VerifierError(RuntimeError):
    """The verifier gave no valid reward or could not be run; raised from the cause, whose type
    tools/trials/faults.py classifies (the task's fault or infrastructure)."""


class LiveHarborTask:
    """One started task environment: `sandbox` for the agent, `verify()` once, `close()`."""

    def __init__(
        self, task: Any, environment: Any, trial_dir: Path, environment_config: Any
    ) -> None:
        self.task = task
        self.environment = environment
        self.trial_dir = trial_dir
        self.environment_config = environment_config

    @property
    def sandbox(self) -> Sandbox:
        return self.environment.sandbox

    @property
    def agent_user(self) -> str | int | None:
        """The task's `[agent] user`; None when unset (the image's user, as a trial's agent).
        The shell and a computer-use episode's desktop tools (desktop_episode.py) run as it."""
        user = self.task.config.agent.user
        return None if user in (None, "") else user

    async def open_shell(self) -> Any:
        """A persistent shell in our sandbox, as the task's agent user (`[agent] user`, root
        when unset, as a trial's agent); over `exec` for Harbor's own types, the same way."""
        user = self.agent_user
        if hasattr(self.environment, "sandbox"):
            if user is not None:
                opener: Any = self.sandbox.open_shell  # ours take a user; the base has none
                return await opener(user=user)
            return await self.sandbox.open_shell()
        return ExecShell(self.environment, user=user)

    async def verify(self) -> float:
        """The task's verifier by the trial protocol (tools/trials/verifier.py): by default a
        fresh container of the task's image with the agent's work copied in."""
        try:
            result = await run_verifier(
                self.task,
                self.environment,
                TrialPaths(trial_dir=self.trial_dir),
                environment_config=self.environment_config,
            )
        except VerifierRunError as exc:
            raise VerifierError(str(exc)) from exc
        rewards = result.rewards or {}
        # The same checks as a trial's (tools/trials/trial.py), raised as the task's faults: a
        # 'reward' entry, every value finite, the reward in [0, 1] (no other entry stands in).
        if "reward" not in rewards:
            message = f"the verifier reported no 'reward' entry (got {sorted(rewards)[:5]})"
            raise VerifierError(message) from NoRewardError(message)
        problem = reward_problem(rewards)
        if problem:
            raise VerifierError(problem) from RewardOutOfRangeError(problem)
        return float(rewards["reward"])

    async def stopped(self) -> str | None:
        """Why the agent's sandbox is no longer running, when its engine answers and says so
        (the container exited or is gone while we had not closed it: something inside ended
        it); None while it runs, or when the engine cannot tell (an infrastructure failure)."""
        sandbox = getattr(self.environment, "_sandbox", None)
        if sandbox is None or not hasattr(sandbox, "container_id") or sandbox._closed:
            return None  # Harbor's own types: nothing of ours to ask; closed by us

        try:
            api = (await engine.call(engine.client, sandbox.backend)).api
            state = (await engine.call(api.inspect_container, sandbox.container_id))["State"]
        except docker.errors.NotFound:
            return "the sandbox's container is gone (its processes ended it)"
        except Exception:  # noqa: BLE001 - the engine cannot tell: not the policy's doing
            return None
        if state.get("Running"):
            return None
        return f"the sandbox's container stopped (exit code {state.get('ExitCode')})"

    async def close(self) -> None:
        try:
            await self.environment.stop(delete=True)
        finally:
            shutil.rmtree(self.trial_dir, ignore_errors=True)


def task_starter(backend: str, options: dict[str, Any] | None = None) -> StartTask:
    """`async (task_dir) -> LiveHarborTask` for an engine ('podman', 'docker') or `harbor:<type>`;
    `options` are Harbor EnvironmentConfig fields passed through. Bad names, options or a
    backend that lacks what an episode needs fail here, before any sandbox starts."""
    ours = ENVIRONMENTS  # the one registry (tools/sandbox/harbor_backends.py)
    if backend not in ours and not is_harbor_type(backend):
        raise SandboxError(
            f"training episodes run on {' | '.join(sorted(ours))} | harbor:<type>, not {backend!r}"
        )
    try:
        check_stages(backend, ["grpo"])
        environment_config(backend, options, ours=ours)
    except HarborBackendError as exc:
        raise SandboxError(str(exc)) from None

    async def start(task_dir: Path) -> LiveHarborTask:
        os.environ.setdefault("HARBOR_TELEMETRY", "0")

        task = Task(task_dir=Path(task_dir))
        trial_dir = Path(tempfile.mkdtemp(prefix=f"aes-episode-{task.short_name}-"))
        paths = TrialPaths(trial_dir=trial_dir)
        paths.mkdir()
        config = environment_config(backend, options, ours=ours)
        try:
            environment = EnvironmentFactory.create_environment_from_config(
                config=config,
                environment_dir=task.paths.environment_dir,
                environment_name=task.short_name,
                session_id=f"train-{uuid.uuid4().hex[:12]}",
                trial_paths=paths,
                task_env_config=task.config.environment,
            )
        except BaseException:
            shutil.rmtree(trial_dir, ignore_errors=True)
            raise
        live = LiveHarborTask(task, environment, trial_dir, config)
        try:
            await environment.start(force_build=False)
            await environment.run_healthcheck()
        except BaseException:
            await live.close()
            raise
        return live

    return start
