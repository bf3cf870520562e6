"""Flaky verifiers, caught with a stated confidence (tools/gate/flake.py).

The flaky fixture's tests pass the correct output half the time (a coin from /dev/urandom, real
randomness). With the gate's defaults a gate run sees 11 verifier runs on correct work (the
oracle trial, 2 full reruns, 8 verifier-only reruns on the oracle's saved work in one of those
trials' containers), so one gate run admits it with probability 2**-11. Of 20 gate runs the test
lets at most one admit it (two or more: probability below 5e-5 with all 11 runs made; CI once saw
one of 20, the 1% the bound allows), and fails every time the reruns stop reaching the verifier:
each verdict that got past the oracle must show all 8 verifier-only reruns.
"""

from __future__ import annotations

import asyncio
import math
import shutil

import pytest

from autoenvscaling.tools.gate import GateConfig
from autoenvscaling.tools.gate.flake import caught_flake_rate
from autoenvscaling.tools.gate.pipeline import run_stage, validate_task

from .conftest import FIXTURES

FLAKY = FIXTURES / "gate_tasks" / "flaky_verifier"
GOOD = FIXTURES / "good_task"
# Only the stages a flake meets: lint and build (cached) run, then oracle and repeat decide.
LATER = ("nop", "anti_cheat", "decontam", "calibrate", "dedup")


def miss_probability(flake_rate: float, runs: int) -> float:
    """Chance that a verifier failing `flake_rate` of its runs passes all `runs` of them."""
    return (1.0 - flake_rate) ** runs


def test_the_stated_rate_is_the_binomial_bound():
    # 11 passing runs rule out, at 95%, any failure rate of 23.8% or more ...
    assert caught_flake_rate(11) == pytest.approx(1 - 0.05 ** (1 / 11))
    assert round(caught_flake_rate(11), 3) == 0.238
    assert miss_probability(caught_flake_rate(11), 11) == pytest.approx(0.05)
    # ... and a 50% flake passes all 11 once in 2048 gate runs.
    assert miss_probability(0.5, 11) == 2.0**-11
    assert caught_flake_rate(0) == 1.0
    assert caught_flake_rate(3) > caught_flake_rate(11) > caught_flake_rate(40)


def test_defaults_give_eleven_runs():
    config = GateConfig()
    assert 1 + config.repeat + config.verifier_reruns == 11
    assert math.isclose(miss_probability(0.5, 11) * 20, 20 / 2048)


@pytest.mark.slow
async def test_a_deterministic_verifier_passes_with_its_bound_stated(engine_ready):
    result = await run_stage("repeat", GOOD, GateConfig(trial_concurrency=2))
    assert result.passed, result.reason
    assert result.details["verifier_only_rewards"] == [1.0] * 8  # one container, 8 checks
    assert result.details["verifier_runs"] == 11
    assert "24% or more" in result.reason and "95% confidence" in result.reason


@pytest.mark.slow
async def test_a_half_flaky_verifier_is_rejected_in_20_gate_runs_of_20(engine_ready):
    config = GateConfig(trial_concurrency=4, skip=list(LATER))
    # Five gate runs at a time: twenty at once on two cores can stretch the reruns past their
    # time budget, and a cut rerun is a weaker check than the one this test states.
    at_once = asyncio.Semaphore(5)

    async def one_gate_run():
        async with at_once:
            return await validate_task(FLAKY, config, skip=())

    verdicts = await asyncio.gather(*(one_gate_run() for _ in range(20)))
    stages = [v.stage for v in verdicts]
    admitted = [v for v in verdicts if v.admitted]
    assert len(admitted) <= 1, [v.summary() for v in admitted]
    rejected = [v for v in verdicts if not v.admitted]
    assert {v.stage for v in rejected} <= {"oracle", "repeat"}, stages
    for verdict in rejected:
        assert "flaky verifier" in verdict.reason or "scored 0" in verdict.reason, verdict.reason
        assert verdict.proposer_reward == -1.0
    # The oracle stage passes on a lucky first coin (about half the runs); repeat then sees it,
    # with every verifier-only rerun made (a rerun cut short would loosen the stated bound).
    past_oracle = [v for v in verdicts if v.stage == "repeat" or v.admitted]
    for verdict in past_oracle:
        details = next(r for r in verdict.stages if r.stage == "repeat").details
        assert len(details["verifier_only_rewards"]) == 8, details
        assert details["verifier_runs"] == 11, details


@pytest.mark.slow
async def test_a_task_working_in_the_root_is_never_emptied(engine_ready, tmp_path):
    # Restoring the saved work means emptying the workdir first: never for "/".
    task = tmp_path / "root_workdir"
    shutil.copytree(GOOD, task)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text().replace("WORKDIR /app\n", "WORKDIR /\n"))
    result = await run_stage("repeat", task, GateConfig(repeat=1, trial_concurrency=2))
    assert result.passed, result.reason
    assert result.details["verifier_only_rewards"] == [] and result.details["verifier_runs"] == 2


async def test_a_rerun_without_a_reward_in_a_stopped_sandbox_says_so():
    """Seen in CI on Harbor's podman type: the container stopped between verifier-only reruns
    and five "no reward" runs read as a flaky verifier. A rerun without a reward now asks
    whether the sandbox still runs; a stopped one fails the trial with that reason, the task's
    fault (only its tests ran there: see the attack below)."""
    from harbor.environments.base import ExecResult

    from autoenvscaling.tools.gate.flake import SandboxStoppedError, _still_running
    from autoenvscaling.tools.trials.faults import trial_failure
    from autoenvscaling.tools.trials.trial import TrialOutcome

    class Env:
        def __init__(self, code: int) -> None:
            self.code = code

        async def exec(self, command: str, **_kwargs: object) -> ExecResult:
            gone = "Error: can only create exec sessions on running containers"
            return ExecResult(stdout="", stderr=gone if self.code else "", return_code=self.code)

    await _still_running(Env(0), "FAIL")  # running: the missing reward is the verifier's
    with pytest.raises(SandboxStoppedError, match="can only create exec sessions") as raised:
        await _still_running(Env(125), "")
    outcome = TrialOutcome(
        task="t", task_name="t", agent="rerun", backend="harbor:podman", reward=None,
        error=f"SandboxStoppedError: {raised.value}", error_kind="agent",
    )  # fmt: skip
    found = trial_failure(outcome, actor="reference")
    assert found is not None and found.task_fault and "stopped" in found.describe(), found


@pytest.mark.slow
async def test_a_task_that_stops_its_sandbox_in_the_reruns_is_rejected_not_unjudged(tmp_path):
    """Attack: tests/test.sh ends every process when it sees the reruns' snapshot, so the
    container stops there. Had a stopped sandbox been the machine's failure, the task would
    leave the gate "not judged" with no reward instead of its -1."""
    task = tmp_path / "word-count"
    shutil.copytree(FIXTURES / "good_task", task)
    test_sh = task / "tests" / "test.sh"
    lines = test_sh.read_text().splitlines()
    attack = "[ -f /tmp/.aes-flake-work.tar ] && kill -KILL -1"
    test_sh.write_text("\n".join([lines[0], attack, *lines[1:]]) + "\n")
    verdict = await validate_task(task, GateConfig(repeat=1), skip=("calibrate", "dedup"))
    assert verdict.stage == "repeat" and not verdict.admitted, verdict.summary()
    assert verdict.proposer_reward == -1.0 and not verdict.infrastructure_error, verdict.summary()
    assert "stopped" in verdict.reason, verdict.reason
