"""The stages that run the task: `build`, `oracle` (reward exactly 1.0), `nop` (an empty attempt
scores below the threshold) and `repeat` (the oracle's reward does not change between runs)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path

from harbor.models.task.task import Task

from ..sandbox.base import BuildError, SandboxError
from ..sandbox.harbor_backends import our_engine
from ..sandbox.images import build_image
from ..sandbox.netns import gives_internet
from ..tasks.format import load_task
from ..trials.faults import TrialFailure, trial_failure
from ..trials.trial import DISK_FULL, TrialOutcome
from .config import GateConfig, StageName
from .flake import RERUN_AGENT, caught_flake_rate
from .harness import environment_options, failure_excerpt, gate_trial
from .network import Phase, network_need
from .results import StageResult, excerpt

Prior = Mapping[StageName, StageResult]


def failure(outcome: TrialOutcome) -> TrialFailure | None:
    """Every trial here runs the task's own solution (or nothing): its timeout is the task's."""
    return trial_failure(outcome, actor="reference")


def _trial_details(outcome: TrialOutcome) -> dict[str, object]:
    return {
        "reward": outcome.reward,
        "rewards": outcome.rewards,
        "error": outcome.error,
        "duration_sec": round(outcome.duration_sec, 3),
        "trial_dir": outcome.trial_dir,
        "capped_files": outcome.capped_files,
    }


def _failed_trial(stage: StageName, what: str, outcome: TrialOutcome) -> StageResult:
    """A trial that ended without a reward: the task's fault or the machine's."""
    fault = failure(outcome)
    assert fault is not None
    details = _trial_details(outcome)
    if not fault.task_fault:
        return StageResult.infrastructure(
            stage, f"the {what} trial failed: {fault.describe()}", **details
        )
    return _rejected(stage, outcome, f"the {what} run failed: {fault.describe()}", details)


def _rejected(
    stage: StageName, outcome: TrialOutcome, reason: str, details: dict[str, object] | None = None
) -> StageResult:
    """A failed stage shown with its trial's failure excerpt (details: the trial's by default)."""
    return StageResult(
        stage=stage,
        passed=False,
        details=_trial_details(outcome) if details is None else details,
        excerpt=failure_excerpt(outcome),
        reason=reason,
    )


def network_blame(task: Path, config: GateConfig, *phases: Phase) -> str:
    """Why a failed trial is the network's doing, when the task fetches in `phases`; "" when it
    fetches nothing there (the usual reason stands)."""
    need = network_need(task, allow_internet=config.allow_internet)
    if not need.in_phase(*phases):
        return ""
    if need.granted and our_engine(config.backend) and not gives_internet(config.backend):
        return (
            f"{need.fetched(*phases)}; the policy grants it, but the docker "
            "backend gives no sandbox a network (its bridge reaches the host's services): run "
            "the gate with --backend podman"
        )
    return need.advice(*phases)


# --------------------------------------------------------------------------- build


def _harbor_name(task: Path) -> str:
    return Task(task_dir=task).short_name


async def build(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    loaded = load_task(task)
    env = loaded.config.environment
    if engine := our_engine(config.backend):
        try:
            image = await build_image(
                loaded.environment_dir,
                backend=engine,
                task_name=_harbor_name(task),  # the name Harbor's trials build under: one cache
                docker_image=env.docker_image,
                timeout_sec=env.build_timeout_sec,
                network=environment_options(task, config).get("kwargs", {}).get("network", False),
            )
        except (BuildError, SandboxError) as exc:  # SandboxError: no network to be had here
            said = " ".join(str(exc).split())
            # A refusal (the builder never ran, the network is not to blame) names what to
            # change at its start; a failed build's cause is at its end.
            refused = said.startswith("refused to build")
            said = said[:1200] if refused else said[-400:]
            blame = "" if refused else network_blame(task, config, "build")
            return StageResult(
                stage="build",
                passed=False,
                excerpt=excerpt(str(exc)),
                details={"network_need": bool(blame)},
                reason=f"the environment does not build: {blame}"
                if blame
                else f"the environment does not build (build timeout "
                f"{env.build_timeout_sec:g} s): {said}",
            )
        return StageResult(
            stage="build",
            passed=True,
            reason=f"built image {image.tag}",
            details={"image": image.tag, "notes": image.notes},
        )
    # Harbor's own backend has no build call of ours: a nop trial builds and starts the image.
    outcome = await gate_trial(task, config, agent="nop", label="build")
    fault = failure(outcome)
    if fault is not None and fault.exception in ("BuildError", "SandboxBuildFailedError"):
        return _rejected("build", outcome, f"the environment does not build: {outcome.error}")
    if fault is not None and not fault.task_fault:
        return StageResult.infrastructure(
            "build",
            f"could not start the environment: {fault.describe()}",
            **_trial_details(outcome),
        )
    return StageResult(
        stage="build",
        passed=True,
        details=_trial_details(outcome),
        reason=f"the environment builds and starts on {config.backend}",
    )


# --------------------------------------------------------------------------- oracle


async def oracle(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    outcome = await gate_trial(task, config, agent="oracle", label="oracle")
    fault = failure(outcome)
    if (
        outcome.reward != 1.0
        and (fault is None or fault.task_fault)  # an engine failure stays infrastructure
        and (blame := network_blame(task, config, "verifier", "solution"))
    ):
        # Confirmed by the trial: the solution or the tests fetch, and no network was given.
        return _rejected(
            "oracle",
            outcome,
            f"the oracle did not score 1.0 ({outcome.error or outcome.reward}), and {blame}",
            _trial_details(outcome) | {"network_need": True},
        )
    if failure(outcome):
        return _failed_trial("oracle", "oracle", outcome)
    details = _trial_details(outcome)
    if outcome.reward == 1.0:
        return StageResult(
            stage="oracle", passed=True, details=details, reason="the reference solution scores 1.0"
        )
    # Reruns tell a wrong solution from a verifier that changes its mind.
    reruns = await asyncio.gather(
        *(
            gate_trial(task, config, agent="oracle", label=f"oracle-rerun-{i}")
            for i in range(max(config.repeat, 1))
        )
    )
    details["rerun_rewards"] = [o.reward for o in reruns]
    details["reruns"] = [_trial_details(o) for o in reruns]
    odd = [o for o in reruns if failure(o) is None and o.reward != outcome.reward]
    if odd:
        shown = ", ".join(
            f"{r:g}" for r in [outcome.reward, *(o.reward for o in reruns)] if r is not None
        )
        return _rejected(
            "oracle",
            outcome,
            f"flaky verifier: identical oracle runs scored {shown}; make tests/ "
            "deterministic (no randomness, clocks, races or network)",
            details,
        )
    return _rejected(
        "oracle",
        outcome,
        f"the oracle scored {outcome.reward:g}, not exactly 1.0 (in all "
        f"{len(reruns) + 1} runs): solution/solve.sh does not pass tests/ (fix the solution, "
        f"or the tests if they check the wrong thing){_disk_full_hint(outcome)}",
        details,
    )


def _disk_full_hint(outcome: TrialOutcome) -> str:
    """Advice when the solution's own output says it filled its disk: the cap, not the logic."""
    if not outcome.disk_full:
        return ""
    return (
        f"; solve.sh printed '{DISK_FULL}': it filled the writable layer, whose size is "
        "[environment] storage_mb (raise it, or write less)"
    )


# --------------------------------------------------------------------------- nop


async def nop(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    outcome = await gate_trial(task, config, agent="nop", label="nop")
    if failure(outcome):
        fault = failure(outcome)
        assert fault is not None
        if fault.exception == "RewardFileNotFoundError":
            return _rejected(
                "nop",
                outcome,
                "no reward written after an empty attempt: tests/test.sh must write "
                "/logs/verifier/reward.txt (e.g. 0) also when the checks fail; a `set -e` or "
                "an early `exit` skips the write",
            )
        return _failed_trial("nop", "nop (empty attempt)", outcome)
    reward = outcome.reward
    assert reward is not None
    details = _trial_details(outcome)
    if reward < config.nop_threshold:
        return StageResult(
            stage="nop",
            passed=True,
            details=details,
            reason=f"an empty attempt scores {reward:g} < {config.nop_threshold:g}",
        )
    return _rejected(
        "nop",
        outcome,
        f"the tests pass on the initial state: an empty attempt (nop agent) scored "
        f"{reward:g} >= {config.nop_threshold:g}; the tests must fail until the work the "
        "instruction asks for is done",
        details,
    )


# --------------------------------------------------------------------------- repeat


async def repeat(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    if config.repeat == 0:
        return StageResult.skip("repeat", "repeat = 0: no reruns requested")
    expected = 1.0  # the oracle stage admitted only an exact 1.0
    # The first rerun also re-runs only the verifier on the oracle's saved work (flake.py).
    rechecked = {
        "task_dir": str(task),
        "reruns": config.verifier_reruns,
        "budget_sec": config.max_trial_sec / 3,  # the oracle and Harbor's verifier get the rest
    }
    outcomes = await asyncio.gather(
        *(
            gate_trial(task, config, agent=RERUN_AGENT, label="repeat-0", agent_kwargs=rechecked)
            if i == 0 and config.verifier_reruns
            else gate_trial(task, config, agent="oracle", label=f"repeat-{i}")
            for i in range(config.repeat)
        )
    )
    infra = [o for o in outcomes if (f := failure(o)) is not None and not f.task_fault]
    if infra:
        return _failed_trial("repeat", "oracle rerun", infra[0])
    rewards = [o.reward for o in outcomes]
    verifier_only = [r for o in outcomes for r in o.agent_metadata.get("verifier_reruns", [])]
    runs = 1 + len(rewards) + len(verifier_only)
    caught = caught_flake_rate(runs)
    details = {
        "rewards": [expected, *rewards],
        "verifier_only_rewards": verifier_only,
        "runs": [_trial_details(o) for o in outcomes],
        "verifier_runs": runs,
        "caught_flake_rate_95": round(caught, 4),
    }
    odd = [o for o in outcomes if o.reward != expected]
    odd_checks = [r for r in verifier_only if r != expected]
    if not odd and not odd_checks:
        return StageResult(
            stage="repeat",
            passed=True,
            details=details,
            reason=f"the oracle scored {expected:g} in all {len(rewards) + 1} runs and its saved "
            f"work {expected:g} in {len(verifier_only)} verifier-only reruns: a verifier failing "
            f"{caught:.0%} or more of its runs would have been caught (95% confidence)",
        )
    shown = ", ".join("no reward" if r is None else f"{r:g}" for r in [expected, *rewards])
    if odd:
        first = odd[0]
        why = f" ({found.describe()})" if (found := failure(first)) else ""
        tail = failure_excerpt(first)
    else:
        why = ""
        tail = excerpt(
            next(
                (
                    o.agent_metadata.get("verifier_rerun_output", "")
                    for o in outcomes
                    if o.agent_metadata.get("verifier_reruns")
                ),
                "",
            )
        )
    checks = ", ".join("no reward" if r is None else f"{r:g}" for r in verifier_only)
    failed = len(odd) + len(odd_checks)
    return StageResult(
        stage="repeat",
        passed=False,
        details=details,
        excerpt=tail,
        reason=f"flaky verifier: identical oracle runs scored {shown}{why}"
        + (
            f", and re-running only the tests on the oracle's saved work gave {checks}"
            if checks
            else ""
        )
        + f" ({failed} of {runs} runs not 1.0); the tests must give the same reward every time "
        "(no randomness, clocks, races or network)",
    )
