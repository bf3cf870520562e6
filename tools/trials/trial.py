"""Run real Harbor trials of tasks on our sandboxes and read back one typed outcome per trial.

Harbor owns the trial protocol (tests hidden until the agent is done, verifier, reward files); this
module only configures it and turns its result folder into a `TrialOutcome`. A failing trial never
raises: its error is in the outcome, so one broken task cannot stop a batch.

Hard caps, whatever the task asks for: `max_trial_sec` bounds the whole trial's wall time (the
trial is cancelled, which stops its sandbox); a reward must be a finite number in [0, 1]; every
file the trial leaves in its folder is cut to its last `max_artifact_bytes` (its full size is
recorded in `capped_files`), and nothing here reads a whole file to take a tail.

A trial whose sandbox never started (nothing of the agent ran, and the failure is the machine's,
not a build's) is run once more in a fresh sandbox: a loaded engine sometimes loses a container
it just created, and that must not cost a task its verdict or a policy its attempt.
"""

from __future__ import annotations

import asyncio
import functools
import os
import stat
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from harbor.models.trial.config import AgentConfig, TaskConfig, TrialConfig
from pydantic import BaseModel, Field

from ..sandbox.base import Backend
from ..sandbox.harbor_backends import ENVIRONMENTS, environment_config
from ..scratch import make_scratch
from .faults import reward_problem
from .harbor_logging import route_harbor_records
from .verifier import work_skipped

#: Where the gate's trials run: one of our engines, or Harbor's own docker compose backend.
BackendName = Literal[Backend, "harbor-docker"]
#: Where any other trial may run: a `BackendName`, or any Harbor backend as `harbor:<type>`
#: (e.g. harbor:modal; tools/sandbox/harbor_backends.py), which no Literal can spell.
TrialBackend = BackendName | str

BUILTIN_AGENTS = {"oracle", "nop"}
#: Harbor's oracle and nop have no web tools of their own: the sandbox's network policy is what
#: applies. Said explicitly, else Harbor logs an ERROR on every trial for nothing to disable.
BUILTIN_AGENT_KWARGS = {"disable_web_search": False}


class TrialOutcome(BaseModel):
    task: str = Field(description="The task folder.")
    task_name: str
    agent: str
    backend: str
    reward: float | None = Field(description="The verifier's reward; None when there was none.")
    rewards: dict[str, float] = Field(default_factory=dict)
    error: str | None = Field(
        default=None, description="Exception type and message, if the trial failed."
    )
    error_kind: Literal["build", "agent", "verifier", "timeout", "infrastructure"] | None = None
    verifier_output: str = Field(default="", description="Tail of the verifier's test-stdout.txt.")
    trial_dir: str | None = None
    duration_sec: float = 0.0
    agent_metadata: dict[str, Any] = Field(default_factory=dict)
    capped_files: dict[str, int] = Field(
        default_factory=dict,
        description="Trial files cut to their tail: path relative to the trial folder -> "
        "original size in bytes.",
    )
    work_skipped: list[str] = Field(
        default_factory=list,
        description="What the copy of the agent's work to a separate verifier left out, as "
        "'path (why)': links out of the folder, files past the copy's cap.",
    )
    agent_started: bool | None = Field(
        default=None,
        description="Whether Harbor got as far as setting up the agent; None when the trial "
        "raised before Harbor could say (a task it cannot load, the wall-time cap).",
    )
    disk_full: bool = Field(
        default=False,
        description="The agent's output says a write failed for lack of space: it filled the "
        "writable layer, a filesystem of the task's storage_mb.",
    )
    start_retries: int = Field(
        default=0,
        description="How many times the trial was run again because its sandbox did not start "
        "(the first attempt's folder stays beside this one).",
    )


#: Most bytes of one file a trial folder keeps (the tail: where failures are reported).
MAX_ARTIFACT_BYTES = 1_000_000
#: Longest a trial may take, whatever its task's timeouts say.
MAX_TRIAL_SEC = 1800.0
#: What a write past the writable layer's cap prints (the layer is a filesystem of that size).
DISK_FULL = "No space left on device"
#: Fresh tries after a sandbox that did not start (see the module's docstring).
START_RETRIES = 1


class TrialWallTimeError(TimeoutError):
    """A trial ran past the caller's wall-time cap and was cancelled."""


def _tail(path: Path, limit: int = 4000) -> str:
    """The last `limit` characters of a text file, read from its end (never the whole file)."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            handle.seek(max(0, size - 4 * limit))
            data = handle.read(4 * limit)
    except OSError:
        return ""
    return data.decode("utf-8", errors="replace")[-limit:]


def cap_folder(folder: Path, max_bytes: int = MAX_ARTIFACT_BYTES) -> dict[str, int]:
    """Cut every regular file over `max_bytes` under `folder` to its last `max_bytes`.

    Streams the tail into a new file and renames it over the old one; links are not followed.
    Returns {relative path: original size} of the files cut.
    """
    capped: dict[str, int] = {}
    for dirpath, _dirs, names in os.walk(folder, followlinks=False):
        for name in names:
            path = Path(dirpath) / name
            try:
                info = os.lstat(path)
                if not stat.S_ISREG(info.st_mode) or info.st_size <= max_bytes:
                    continue
                temp = path.with_name(f".{name}.cap")
                with open(path, "rb") as src, open(temp, "wb") as dst:
                    src.seek(info.st_size - max_bytes)
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                os.replace(temp, path)
                capped[path.relative_to(folder).as_posix()] = info.st_size
            except OSError:
                continue  # vanished or unreadable: nothing left to cap
    return capped


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


def _create_trial(config: Any) -> Any:
    """`Trial.create(config)` on a worker thread, in a loop of its own: nothing it awaits for a
    local task (loading it) outlives the call, and the trial it returns holds no loop."""
    # lazy: Harbor's Trial and its agents (~50 modules, 0.1-0.3 s) only once a trial runs
    from harbor.trial.trial import Trial

    return asyncio.run(Trial.create(config))


def did_not_start(outcome: TrialOutcome) -> bool:
    """The trial failed before its agent ran, for a reason that is not the task's build."""
    return (
        outcome.error is not None
        and outcome.error_kind == "infrastructure"
        and outcome.agent_started is False
    )


def retried_when_unstarted[**P](
    run: Callable[P, Awaitable[TrialOutcome]],
) -> Callable[P, Awaitable[TrialOutcome]]:
    """`run`, tried again in a fresh sandbox (up to START_RETRIES times) when its sandbox did
    not start; the outcome counts the retries."""

    @functools.wraps(run)
    async def retried(*args: P.args, **kwargs: P.kwargs) -> TrialOutcome:
        outcome = await run(*args, **kwargs)
        for retry in range(1, START_RETRIES + 1):
            if not did_not_start(outcome):
                break
            outcome = (await run(*args, **kwargs)).model_copy(update={"start_retries": retry})
        return outcome

    return retried


@retried_when_unstarted
async def run_trial(
    task_dir: Path,
    *,
    agent: str = "oracle",
    backend: TrialBackend = "podman",
    trials_dir: Path | None = None,
    agent_kwargs: dict[str, Any] | None = None,
    agent_env: dict[str, str] | None = None,
    timeout_multiplier: float = 1.0,
    environment_options: dict[str, Any] | None = None,
    max_trial_sec: float | None = MAX_TRIAL_SEC,
    max_artifact_bytes: int = MAX_ARTIFACT_BYTES,
) -> TrialOutcome:
    """One Harbor trial. `agent` is `oracle`, `nop` or an import path `module:Class`.

    `backend` is one of ours or `harbor:<type>` (Harbor's own, e.g. harbor:daytona);
    `environment_options` pass through to Harbor's `EnvironmentConfig` (tools/sandbox/harbor_backends.py).
    `max_trial_sec` caps the trial's wall time (None: no cap beyond the task's own timeouts).
    """
    os.environ.setdefault("HARBOR_TELEMETRY", "0")

    route_harbor_records()

    task_dir = Path(task_dir).resolve()
    started = time.monotonic()
    agent_config = (
        AgentConfig(name=agent, kwargs=dict(BUILTIN_AGENT_KWARGS))
        if agent in BUILTIN_AGENTS
        else AgentConfig(import_path=agent, kwargs=agent_kwargs or {}, env=agent_env or {})
    )
    trials_dir = trials_dir or make_scratch("aes-trials-")
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
        # Off the event loop: Harbor's set-up is synchronous (the task's load and content hash,
        # the trial folder, its lock file) and took ~10 ms a trial from every other episode.
        trial = await asyncio.to_thread(_create_trial, config)
        cap = asyncio.timeout(max_trial_sec)
        try:
            async with cap:
                result = await trial.run()
        except TimeoutError:
            if not cap.expired():
                raise
            raise TrialWallTimeError(
                f"the trial ran past the gate's wall-time cap of {max_trial_sec:g} s and was "
                "stopped: the task hangs or is far too slow (agent, verifier or build)"
            ) from None
    except Exception as exc:  # noqa: BLE001 - a task Harbor cannot load is its outcome
        capped = await asyncio.to_thread(cap_folder, trials_dir, max_artifact_bytes)
        return outcome.model_copy(
            update={
                "error": f"{type(exc).__name__}: {exc}"[:4000],
                "error_kind": _classify(type(exc).__name__, str(exc)),
                "duration_sec": time.monotonic() - started,
                "capped_files": capped,
            }
        )
    trial_path = Path(result.trial_uri.removeprefix("file://"))
    capped = await asyncio.to_thread(cap_folder, trial_path, max_artifact_bytes)
    rewards = (result.verifier_result.rewards if result.verifier_result else None) or {}
    problem = reward_problem(rewards)
    update: dict[str, Any] = {
        "rewards": {} if problem else {k: float(v) for k, v in rewards.items()},
        "reward": float(rewards["reward"]) if "reward" in rewards and not problem else None,
        "capped_files": capped,
        "trial_dir": str(trial_path),
        "verifier_output": _tail(trial_path / "verifier" / "test-stdout.txt"),
        "duration_sec": time.monotonic() - started,
        "agent_metadata": (result.agent_result.metadata or {}) if result.agent_result else {},
        "work_skipped": work_skipped(trial_path),
        "agent_started": result.agent_setup is not None or result.agent_execution is not None,
        "disk_full": any(DISK_FULL in _tail(log) for log in (trial_path / "agent").glob("*.txt")),
    }
    if problem and not result.exception_info:
        update["error"] = f"RewardOutOfRangeError: {problem}"
        update["error_kind"] = "verifier"
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
