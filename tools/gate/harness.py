"""Harbor trials as the gate runs them: a per-process limit on trials in flight, trial folders
kept or cleaned up. Whose fault a failed trial is, the task's or the machine's, is decided in
one place for every caller: tools/trials/faults.py.
"""

from __future__ import annotations

import asyncio
import shutil
import weakref
from pathlib import Path
from typing import Any

from ..sandbox.netns import gives_internet
from ..scratch import make_scratch
from ..trials.trial import TrialOutcome, run_trial
from .config import GateConfig
from .network import declares_internet
from .results import excerpt

#: Temporary trial folders of the gate; a killed gate's are swept by `sweep_scratch`.
SCRATCH_PREFIX = "aes-gate-"

_LIMITS: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, int], asyncio.Semaphore]
]
_LIMITS = weakref.WeakKeyDictionary()


def slots(kind: str, limit: int) -> asyncio.Semaphore:
    """One semaphore per (event loop, kind, limit): a process-wide cap shared by every caller."""
    per_loop = _LIMITS.setdefault(asyncio.get_running_loop(), {})
    return per_loop.setdefault((kind, limit), asyncio.Semaphore(limit))


def failure_excerpt(outcome: TrialOutcome) -> str:
    parts = [p for p in (outcome.error, outcome.verifier_output) if p]
    if outcome.work_skipped:  # the tests may have failed on what never arrived
        shown = "; ".join(outcome.work_skipped[:5])
        parts.insert(0, f"not copied from the agent's work to the verifier: {shown}")
    return excerpt("\n".join(parts))


def environment_options(task: Path, config: GateConfig) -> dict[str, Any]:
    """The trial's Harbor EnvironmentConfig options: the user's, plus the network grant on our
    backends (a task that declares the internet, under a policy that allows it)."""
    options = dict(config.environment_options)
    if gives_internet(config.backend) and config.allow_internet and declares_internet(task):
        options["kwargs"] = {**options.get("kwargs", {}), "network": True}
    return options


async def gate_trial(
    task: Path,
    config: GateConfig,
    *,
    agent: str,
    agent_kwargs: dict[str, Any] | None = None,
    agent_env: dict[str, str] | None = None,
    label: str | None = None,
) -> TrialOutcome:
    """One Harbor trial under the process-wide trial limit. Never raises (see `run_trial`)."""
    keep = config.trials_dir is not None
    if keep:
        assert config.trials_dir is not None
        trials_dir = config.trials_dir / task.name / (label or agent.rsplit(":", 1)[-1])
        trials_dir.mkdir(parents=True, exist_ok=True)
    else:
        trials_dir = make_scratch(f"{SCRATCH_PREFIX}{task.name[:40]}-")
    try:
        async with slots("trial", config.trial_concurrency):
            outcome = await run_trial(
                task,
                agent=agent,
                backend=config.backend,
                environment_options=environment_options(task, config),
                trials_dir=trials_dir,
                agent_kwargs=agent_kwargs,
                agent_env=agent_env,
                timeout_multiplier=config.timeout_multiplier,
                max_trial_sec=config.max_trial_sec,
                max_artifact_bytes=config.max_artifact_bytes,
            )
        return outcome if keep else outcome.model_copy(update={"trial_dir": None})
    finally:
        if not keep:
            await asyncio.to_thread(shutil.rmtree, trials_dir, True)
