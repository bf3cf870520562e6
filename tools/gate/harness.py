"""Harbor trials as the gate runs them: a per-process limit on trials in flight, trial folders
kept or cleaned up, and each failure sorted into "the task's fault" or "the machine's".
"""

from __future__ import annotations

import asyncio
import shutil
import weakref
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from autoenvscaling.tools.gate.config import GateConfig
from autoenvscaling.tools.gate.results import excerpt
from autoenvscaling.tools.scratch import make_scratch
from autoenvscaling.tools.trials.trial import TrialOutcome, run_trial

# Harbor exceptions a task causes, with what the proposer should change. Anything else (sandbox
# start, engine, upload, our own bugs) is an infrastructure failure and is not blamed on the task.
TASK_FAULTS: dict[str, str] = {
    "BuildError": "the environment does not build",
    "VerifierTimeoutError": "the verifier did not finish within [verifier].timeout_sec of "
    "task.toml: tests/test.sh hangs or is too slow",
    "AgentTimeoutError": "the agent phase did not finish within [agent].timeout_sec of task.toml",
    "RewardFileNotFoundError": "tests/test.sh wrote no reward: it must write "
    "/logs/verifier/reward.txt (or reward.json) on every path, also when a check fails "
    "(a `set -e` or an early `exit` skips it)",
    "RewardFileEmptyError": "tests/test.sh wrote an empty reward file",
    "VerifierOutputParseError": "the reward file cannot be parsed: reward.txt must hold one "
    "number, reward.json an object of numbers",
    "RewardOutOfRangeError": "tests/test.sh wrote an unusable reward: it must be a finite "
    "number in [0, 1] (1 when every check passes, 0 otherwise, or the fraction passed)",
    "TrialWallTimeError": "the trial ran past the gate's wall-time cap (GateConfig.max_trial_sec) "
    "whatever task.toml allows: solution/solve.sh or tests/test.sh hangs or is far too slow",
}

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


class TrialFailure(BaseModel):
    """Why a trial produced no usable reward."""

    task_fault: bool
    exception: str
    message: str
    advice: str

    def describe(self) -> str:
        return f"{self.advice} ({self.exception}: {self.message[:300]})"


def failure(outcome: TrialOutcome) -> TrialFailure | None:
    """None when the trial ran to a reward; else who is at fault and what to change."""
    if outcome.error is None:
        if outcome.reward is None:
            return TrialFailure(
                task_fault=True,
                exception="NoReward",
                message="the verifier gave no 'reward' key",
                advice="the reward file has no 'reward' entry: reward.json must hold "
                '{"reward": <number>}',
            )
        return None
    exception, _, message = outcome.error.partition(": ")
    advice = TASK_FAULTS.get(exception)
    return TrialFailure(
        task_fault=advice is not None,
        exception=exception,
        message=message,
        advice=advice or "the trial failed outside the task's control",
    )


def failure_excerpt(outcome: TrialOutcome) -> str:
    parts = [p for p in (outcome.error, outcome.verifier_output) if p]
    return excerpt("\n".join(parts))


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
                environment_options=config.environment_options,
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
