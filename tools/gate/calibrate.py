"""The `calibrate` stage: the current solver must find the task neither trivial nor impossible.

The solver is any Harbor agent (`GateConfig.solver`: 'oracle', 'nop' or 'module:Class'). Its
mean reward over `calibration_rollouts` trials must lie in `band`; a mean within `edge_margin`
of an edge earns more rollouts (up to `calibration_rollouts_near_edge`) before judging, and the
rewards must vary (a constant reward carries no learning signal for GRPO).

The verdict shows the mean's 95% interval (tools/stats.py) but is decided on the mean, not by the
pool's interval rule: at 4 to 8 rollouts no interval fits inside [0.25, 0.75] (a 50% task needs
12) and none lies wholly outside it (0/8 still reaches 0.32), so "reject only when the interval is
outside" would admit every task whose rewards vary and "admit only when it is inside" none.

Each rollout is classified by tools/trials/faults.py: a rollout lost to infrastructure (the
solver's model, the engine, a sandbox) is left out of the mean, and with too few left the stage
cannot judge; a rollout that exposes the task's fault (no reward written for this workspace, a
build that fails, tests that hang) rejects the task as broken, not as too hard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from ..stats import rate
from ..trials.faults import TrialFailure, trial_failure
from ..trials.trial import TrialOutcome
from .config import GateConfig, StageName
from .harness import failure_excerpt, gate_trial
from .results import StageResult

Prior = Mapping[StageName, StageResult]


async def _rollouts(task: Path, config: GateConfig, start: int, count: int) -> list[TrialOutcome]:
    assert config.solver is not None
    return list(
        await asyncio.gather(
            *(
                gate_trial(
                    task,
                    config,
                    agent=config.solver,
                    agent_kwargs=config.solver_kwargs,
                    agent_env=config.solver_env,
                    label=f"calibrate-{start + i}",
                )
                for i in range(count)
            )
        )
    )


def near_edge(mean: float, config: GateConfig) -> bool:
    return any(abs(mean - edge) <= config.edge_margin + 1e-9 for edge in config.band)


async def calibrate(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    if not config.solver:
        return StageResult.skip(
            "calibrate", "no solver configured (GateConfig.solver): calibration not run"
        )
    outcomes = await _rollouts(task, config, 0, config.calibration_rollouts)
    mean = _mean(_valid(outcomes))
    if near_edge(mean, config) and config.calibration_rollouts_near_edge > len(outcomes):
        extra = config.calibration_rollouts_near_edge - len(outcomes)
        outcomes += await _rollouts(task, config, len(outcomes), extra)
    # An unreachable model or a dead sandbox says nothing about the task: such rollouts are
    # left out, and with too few left the stage cannot judge (an infrastructure result).
    valid = _valid(outcomes)
    faults = [solver_failure(o) for o in outcomes]
    attempts = [
        {
            "attempt_id": o.agent_metadata.get("attempt_id"),
            "reward": None if f else o.reward,
            "fault": f.fault if f else None,
            "infrastructure": f is not None and not f.task_fault,
            "error": o.agent_metadata.get("error") or o.error,
            "trial_dir": o.trial_dir,  # the round report links each rollout's trial folder
        }
        for o, f in zip(outcomes, faults, strict=True)
    ]
    broken_task = next(
        ((o, f) for o, f in zip(outcomes, faults, strict=True) if f and f.task_fault), None
    )
    if broken_task is not None:
        # A task-author error the solver's work exposed: the task is broken, not too hard.
        outcome, fault = broken_task
        return StageResult(
            stage="calibrate",
            passed=False,
            details={
                "solver": config.solver,
                "task_fault": fault.exception,
                "rewards": [o.reward for o in outcomes],
                "attempts": attempts,
            },
            excerpt=failure_excerpt(outcome),
            reason=f"a solver rollout exposed a broken task: {fault.describe()}",
        )
    needed = min_valid_rollouts(config)
    if len(valid) < needed:
        broken = [f for f in faults if f is not None]
        return StageResult.infrastructure(
            "calibrate",
            f"only {len(valid)} of {len(outcomes)} solver rollouts finished (at least {needed} "
            f"needed); the rest failed outside the task: {broken[0].describe()}",
            rewards=[o.reward for o in outcomes],
            attempts=attempts,
            infrastructure_errors=len(outcomes) - len(valid),
        )
    rewards = [o.reward if o.reward is not None else 0.0 for o in valid]
    mean = sum(rewards) / len(rewards)
    low, high = config.band
    interval = rate(rewards)  # shown with the mean; the band decision is the mean's (docstring)
    details = {
        "solver": config.solver,
        "rewards": rewards,
        "mean": mean,
        "rollouts": len(rewards),
        "band": [low, high],
        "interval": [interval.low, interval.high],
        "errors": [o.error for o in valid if o.error],
        "infrastructure_errors": len(outcomes) - len(valid),
        "attempts": attempts,
    }
    shown = (
        ", ".join(f"{r:g}" for r in rewards) + f"; 95% CI {interval.low:.2f}-{interval.high:.2f}"
    )
    if mean > high:
        return StageResult(
            stage="calibrate",
            passed=False,
            details=details,
            reason=f"too easy for the current solver: mean reward {mean:.2f} over {len(rewards)} "
            f"rollouts ({shown}) is above the band [{low:g}, {high:g}]; make the task harder",
        )
    if mean < low:
        return StageResult(
            stage="calibrate",
            passed=False,
            details=details,
            reason=f"too hard for the current solver: mean reward {mean:.2f} over {len(rewards)} "
            f"rollouts ({shown}) is below the band [{low:g}, {high:g}]; make the task easier or "
            "the instruction clearer",
        )
    if len(set(rewards)) == 1:
        return StageResult(
            stage="calibrate",
            passed=False,
            details=details,
            reason=f"the solver's rewards never vary ({shown}): every attempt scores the same, "
            "so there is no learning signal; grade so that better work scores higher",
        )
    return StageResult(
        stage="calibrate",
        passed=True,
        details=details,
        reason=f"solver mean reward {mean:.2f} over {len(rewards)} rollouts ({shown}) is in "
        f"[{low:g}, {high:g}]",
    )


def solver_failure(outcome: TrialOutcome) -> TrialFailure | None:
    """Why a solver rollout has no reward to count (tools/trials/faults.py), or None."""
    return trial_failure(outcome, actor="policy")


def _valid(outcomes: list[TrialOutcome]) -> list[TrialOutcome]:
    return [o for o in outcomes if solver_failure(o) is None]


def min_valid_rollouts(config: GateConfig) -> int:
    """Rollouts that must finish before the mean is judged: half the planned ones, at least 2
    (a single reward cannot show variance)."""
    return min(config.calibration_rollouts, max(2, (config.calibration_rollouts + 1) // 2))


def _mean(outcomes: list[TrialOutcome]) -> float:
    rewards = [o.reward if o.reward is not None else 0.0 for o in outcomes]
    return sum(rewards) / max(len(rewards), 1)
