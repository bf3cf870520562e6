"""Who is at fault when an attempt at a task gives no usable reward: the one rule every caller uses.

Every attempt at a task — a gate trial, a solver attempt (baseline, refresh, calibration), a GRPO
episode — ends in one of three classes (ARCHITECTURE.md, *Who is at fault*, has the table of what
each caller does with each):

- **scored** (`None` here): the verifier gave a finite reward in [0, 1]. A policy that runs past
  one of its own limits is scored too, 0 when no reward came back: its agent time (the verifier
  judges what it left) and the sandbox's writable-layer cap (the sandbox is stopped, its work lost).
- **the task's fault** (`fault="task"`): the task's author erred. Its environment does not build;
  its verifier writes no reward, an empty, unparsable or out-of-range one, or runs past its
  timeout; the reference solution runs past the agent timeout or the writable-layer cap; the trial
  runs past the wall cap.
  The gate rejects such a task (the proposer's -1). For a task already in the pool the attempt is
  not scored either: the policy did nothing wrong, and a 0 would teach it so.
- **infrastructure** (`fault="infrastructure"`): anything else. The model endpoint failed after
  its retries, the engine could not be reached or crashed, a sandbox did not start, a file could
  not be copied in or out, the verifier could not be run, our own bug. Nobody is blamed and
  nothing is scored.

The rule reads exception type names, because that is all a Harbor trial result keeps: Harbor's
and ours (`BuildError`, `NoRewardError`, ...) name the task's faults; any other name, a name we
have never seen included, is infrastructure. An unknown failure never becomes a verdict on a task.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel

if TYPE_CHECKING:
    from .trial import TrialOutcome

Fault = Literal["task", "infrastructure"]
#: Who ran the agent phase: the task's own solution (or nothing: the gate's oracle, nop and
#: probes), or a policy being measured (the solver, the cheat agent, a GRPO episode).
Actor = Literal["reference", "policy"]
#: Where a GRPO episode failed: starting its sandbox, inside a tool call, verifying.
Phase = Literal["start", "tool", "verify"]

# Exception names that are the task's fault, with what its author should change.
TASK_FAULTS: dict[str, str] = {
    "BuildError": "the environment does not build",
    "SandboxBuildFailedError": "the environment does not build",
    "VerifierTimeoutError": "the verifier did not finish within [verifier].timeout_sec of "
    "task.toml: tests/test.sh hangs or is too slow",
    "AgentTimeoutError": "the agent phase did not finish within [agent].timeout_sec of task.toml",
    "SandboxLimitError": "the sandbox was stopped at its writable-layer cap: the reference "
    "solution writes more than [environment].storage_mb of task.toml allows",
    "RewardFileNotFoundError": "tests/test.sh wrote no reward: it must write "
    "/logs/verifier/reward.txt (or reward.json) on every path, also when a check fails "
    "(a `set -e` or an early `exit` skips it)",
    "RewardFileEmptyError": "tests/test.sh wrote an empty reward file",
    "VerifierOutputParseError": "the reward file cannot be parsed: reward.txt must hold one "
    "number, reward.json an object of numbers",
    "NoRewardError": "the reward file has no 'reward' entry: reward.json must hold "
    '{"reward": <number>}',
    "RewardOutOfRangeError": "tests/test.sh wrote an unusable reward: it must be a finite "
    "number in [0, 1] (1 when every check passes, 0 otherwise, or the fraction passed)",
    "SandboxStoppedError": "the sandbox stopped while tests/test.sh ran again on the oracle's "
    "work (the gate's verifier-only reruns): the tests, or what they left running, ended it",
    "TrialWallTimeError": "the trial ran past the gate's wall-time cap (GateConfig.max_trial_sec) "
    "whatever task.toml allows: solution/solve.sh or tests/test.sh hangs or is far too slow",
}
#: A policy's own limits: the task's fault only when the reference solution ran past them; a
#: policy that does is scored (0 when no reward came back), as past any limit of its own.
REFERENCE_ONLY = frozenset({"AgentTimeoutError", "SandboxLimitError"})

INFRASTRUCTURE: dict[str, str] = {
    "model": "the model endpoint failed after its retries (refused, 5xx, timeout)",
    "trial": "the trial failed outside the task's control (engine, sandbox, copy, our code)",
    "start": "the sandbox did not start (engine, image store, our code)",
    "tool": "the sandbox failed inside a tool call (engine, container)",
    "verify": "the verifier could not be run (engine, copy of the work, our code)",
}


class NoRewardError(RuntimeError):
    """The verifier ran and wrote a reward file, but with no 'reward' entry."""


class RewardOutOfRangeError(ValueError):
    """The verifier's reward is not a finite number in [0, 1]."""


class TrialFailure(BaseModel):
    """Why an attempt produced no usable reward, and whose fault that is."""

    fault: Fault
    exception: str
    message: str
    advice: str

    @property
    def task_fault(self) -> bool:
        return self.fault == "task"

    def describe(self) -> str:
        return f"{self.advice} ({self.exception}: {self.message[:300]})"


def reward_problem(rewards: dict[str, Any]) -> str | None:
    """Why the verifier's rewards are unusable, or None. 'reward' must be finite and in [0, 1]."""
    for key, value in rewards.items():
        try:
            number = float(value)
        except (TypeError, ValueError):
            return f"reward {key!r} is {str(value)[:40]!r}, not a number"
        if not math.isfinite(number):
            return f"reward {key!r} is {number!r}; a reward must be a finite number"
        if key == "reward" and not 0.0 <= number <= 1.0:
            return f"reward is {number:g}, outside [0, 1]"
    return None


def classify(
    exception: str, message: str = "", *, actor: Actor = "policy", where: str = "trial"
) -> TrialFailure:
    """The failure an exception of this type name is. `where` picks the infrastructure advice
    (a key of INFRASTRUCTURE). A policy past its own limit (REFERENCE_ONLY) is no failure:
    callers score it before asking; asked anyway, it is infrastructure, never the task's."""
    advice = TASK_FAULTS.get(exception)
    if advice is not None and (exception not in REFERENCE_ONLY or actor == "reference"):
        return TrialFailure(fault="task", exception=exception, message=message, advice=advice)
    return TrialFailure(
        fault="infrastructure",
        exception=exception,
        message=message,
        advice=INFRASTRUCTURE.get(where, INFRASTRUCTURE["trial"]),
    )


def trial_failure(outcome: TrialOutcome, *, actor: Actor) -> TrialFailure | None:
    """None when the trial is scored; else whose fault its missing reward is.

    Order: a task fault Harbor recorded decides (the task is broken whatever else went wrong);
    a policy past its own limit is scored (the verifier's reward, 0 when it gave none); a model
    call that failed after its retries is infrastructure (its verifier judged an untouched
    workspace); any other error is infrastructure; a verifier that ran without error but gave
    no 'reward' entry is the task's."""
    meta = outcome.agent_metadata
    exception, _, message = (outcome.error or "").partition(": ")
    if exception in TASK_FAULTS and (exception not in REFERENCE_ONLY or actor == "reference"):
        return classify(exception, message, actor=actor)
    if exception in REFERENCE_ONLY:
        return None
    if meta.get("stop_reason") == "error":
        return classify("ModelCallFailed", str(meta.get("error") or ""), where="model")
    if outcome.error is not None:
        return classify(exception, message, actor=actor)
    if outcome.reward is None:
        return classify("NoRewardError", "the verifier gave no 'reward' key", actor=actor)
    return None


def _chain(error: BaseException) -> list[BaseException]:
    """The exception and everything it was raised from, outermost first (cycles cut)."""
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def episode_failure(error: BaseException, *, phase: Phase) -> TrialFailure | None:
    """The failure an exception raised in a GRPO episode is (the episode has no Harbor result:
    the exception itself and what it was raised from are the evidence); None when the policy
    went past a limit of its own (scored: 0, its sandbox and work are gone). A task fault
    anywhere in the chain decides; otherwise it is infrastructure, named by its innermost
    cause."""
    chain = _chain(error)
    for exc in chain:
        name = type(exc).__name__
        if name in REFERENCE_ONLY:
            return None
        if name in TASK_FAULTS:
            return classify(name, str(exc), actor="policy", where=phase)
    root = chain[-1]
    return classify(type(root).__name__, str(error), actor="policy", where=phase)
