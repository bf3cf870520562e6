"""Run real Harbor trials of tasks on our sandboxes and read back one typed outcome per trial.

Harbor owns the trial protocol (tests hidden until the agent is done, verifier, reward files); this
module only configures it and turns its result folder into a `TrialOutcome`. A failing trial never
raises: its error is in the outcome, so one broken task cannot stop a batch.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from autoenvscaling.tools.sandbox.base import Backend

#: Where a trial runs: one of our engines, or Harbor's own docker compose backend.
BackendName = Literal[Backend, "harbor-docker"]

ENVIRONMENTS: dict[str, dict[str, str]] = {
    "podman": {"import_path": "autoenvscaling.tools.sandbox.harbor_env:PodmanEnvironment"},
    "docker": {"import_path": "autoenvscaling.tools.sandbox.harbor_env:DockerEnvironment"},
    # Harbor's own docker backend; needs `docker compose` v2 on the machine.
    "harbor-docker": {"type": "docker"},
}
BUILTIN_AGENTS = {"oracle", "nop"}


class TrialOutcome(BaseModel):
    task: str = Field(description="The task folder.")
    task_name: str
    agent: str
    backend: str
    reward: float | None = Field(description="The verifier's reward; None when there was none.")
    rewards: dict[str, float] = Field(default_factory=dict)
    error: str | None = Field(None, description="Exception type and message, if the trial failed.")
    error_kind: Literal["build", "agent", "verifier", "timeout", "infrastructure"] | None = None
    verifier_output: str = Field("", description="Tail of the verifier's test-stdout.txt.")
    trial_dir: str | None = None
    duration_sec: float = 0.0
    agent_metadata: dict[str, Any] = Field(default_factory=dict)


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return text[-limit:]


def _classify(exception_type: str, message: str) -> str:
    text = f"{exception_type} {message}".lower()
    if "build" in text or "dockerfile" in text:
        return "build"
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if "verifier" in text or "reward" in text:
        return "verifier"
    if "agent" in text:
        return "agent"
    return "infrastructure"


async def run_trial(
    task_dir: Path,
    *,
    agent: str = "oracle",
    backend: BackendName = "podman",
    trials_dir: Path | None = None,
    agent_kwargs: dict[str, Any] | None = None,
    agent_env: dict[str, str] | None = None,
    timeout_multiplier: float = 1.0,
    environment_options: dict[str, Any] | None = None,
) -> TrialOutcome:
    """One Harbor trial. `agent` is `oracle`, `nop` or an import path `module:Class`.

    `backend` is one of ours or `harbor:<type>` (Harbor's own, e.g. harbor:daytona);
    `environment_options` pass through to Harbor's `EnvironmentConfig` (tools/harbor_backends.py).
    """
    os.environ.setdefault("HARBOR_TELEMETRY", "0")
    from harbor.models.trial.config import (
        AgentConfig,
        TaskConfig,
        TrialConfig,
    )
    from harbor.trial.trial import Trial

    from autoenvscaling.tools.harbor_backends import environment_config

    task_dir = Path(task_dir).resolve()
    started = time.monotonic()
    agent_config = (
        AgentConfig(name=agent)
        if agent in BUILTIN_AGENTS
        else AgentConfig(import_path=agent, kwargs=agent_kwargs or {}, env=agent_env or {})
    )
    trials_dir = trials_dir or Path(tempfile.mkdtemp(prefix="aes-trials-"))
    outcome = TrialOutcome(
        task=str(task_dir), task_name=task_dir.name, agent=agent, backend=backend, reward=None
    )
    try:
        config = TrialConfig(
            task=TaskConfig(path=task_dir),
            trials_dir=trials_dir,
            agent=agent_config,
            environment=environment_config(backend, environment_options, ours=ENVIRONMENTS),
            timeout_multiplier=timeout_multiplier,
        )
        trial = await Trial.create(config)
        result = await trial.run()
    except Exception as exc:  # a task Harbor cannot even load
        return outcome.model_copy(
            update={
                "error": f"{type(exc).__name__}: {exc}",
                "error_kind": _classify(type(exc).__name__, str(exc)),
                "duration_sec": time.monotonic() - started,
            }
        )
    trial_path = Path(result.trial_uri.removeprefix("file://"))
    rewards = (result.verifier_result.rewards if result.verifier_result else None) or {}
    update: dict[str, Any] = {
        "rewards": {k: float(v) for k, v in rewards.items()},
        "reward": float(rewards["reward"]) if "reward" in rewards else None,
        "trial_dir": str(trial_path),
        "verifier_output": _tail(trial_path / "verifier" / "test-stdout.txt"),
        "duration_sec": time.monotonic() - started,
        "agent_metadata": (result.agent_result.metadata or {}) if result.agent_result else {},
    }
    if result.exception_info:
        info = result.exception_info
        update["error"] = f"{info.exception_type}: {info.exception_message}"[:4000]
        update["error_kind"] = _classify(info.exception_type, info.exception_message)
    return outcome.model_copy(update=update)


async def run_trials(
    tasks: Sequence[Path],
    *,
    concurrency: int = 2,
    on_done: Callable[[TrialOutcome], Awaitable[None] | None] | None = None,
    **kwargs: Any,
) -> list[TrialOutcome]:
    """Many trials at once, at most `concurrency` in flight; results in the order of `tasks`."""
    gate = asyncio.Semaphore(concurrency)

    async def one(task: Path) -> TrialOutcome:
        async with gate:
            outcome = await run_trial(task, **kwargs)
        if on_done:
            maybe = on_done(outcome)
            if asyncio.iscoroutine(maybe):
                await maybe
        return outcome

    return list(await asyncio.gather(*(one(Path(t)) for t in tasks)))
