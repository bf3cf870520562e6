"""Calibration against scripted solvers whose success rates are known (real Harbor trials).

`ScheduledAgent` solves on the attempts its schedule marks, so a schedule is a success rate:
"1010" solves half the time, "1111" always, "0000" never.
"""

from __future__ import annotations

import pytest

from autoenvscaling.tools.gate import GateConfig, run_stage, validate_task

from .conftest import FIXTURES

TASK = FIXTURES / "good_task"
SCHEDULED = "tests.scheduled_agent:ScheduledAgent"
SCRIPT = "autoenvscaling.tools.trials.script_agent:ScriptAgent"


def scheduled(schedule: str, tmp_path, task=TASK) -> GateConfig:
    return GateConfig(
        solver=SCHEDULED,
        trial_concurrency=4,
        solver_kwargs={
            "schedule": schedule,
            "counter_file": str(tmp_path / "attempts"),
            "task_dir": str(task),
        },
    )


@pytest.mark.parametrize(
    ("schedule", "passed", "rollouts", "words"),
    [
        ("1010", True, 4, "mean reward 0.50 over 4 rollouts"),
        ("0110", True, 4, "in [0.25, 0.75]"),
        ("1111", False, 4, "too easy for the current solver: mean reward 1.00"),
        ("0000", False, 4, "too hard for the current solver: mean reward 0.00"),
        # 1 of 4 sits on the lower edge: 8 rollouts decide (3 of 8 -> in the band).
        ("10001100", True, 8, "mean reward 0.38 over 8 rollouts"),
        ("10000000", False, 8, "too hard for the current solver: mean reward 0.12 over 8"),
        # 3 of 4 sits on the upper edge: 7 of 8 -> too easy.
        ("11101111", False, 8, "too easy for the current solver: mean reward 0.88 over 8"),
    ],
)
async def test_calibration_band_with_known_success_rates(
    engine_ready, tmp_path, schedule, passed, rollouts, words
):
    result = await run_stage("calibrate", TASK, scheduled(schedule, tmp_path))
    assert result.passed is passed, result.reason
    assert result.details["rollouts"] == rollouts and words in result.reason
    assert sorted(result.details["rewards"]) == sorted(float(c) for c in schedule[:rollouts])


async def test_rewards_that_never_vary_are_rejected(engine_ready):
    # Writing a wrong answer always earns the task's partial credit, 0.5: in the band, but flat.
    config = GateConfig(
        solver=SCRIPT,
        trial_concurrency=4,
        solver_kwargs={"commands": ["echo 'wrong 1' > /app/top_words.txt"]},
    )
    result = await run_stage("calibrate", FIXTURES / "gate_tasks" / "_partial_credit", config)
    assert not result.passed and result.details["rewards"] == [0.5] * 4
    assert "never vary" in result.reason


async def test_failed_calibration_costs_the_proposer_a_quarter(engine_ready, tmp_path):
    verdict = await validate_task(TASK, scheduled("1111", tmp_path), skip=())
    assert (verdict.admitted, verdict.stage, verdict.proposer_reward) == (False, "calibrate", -0.25)
    verdict = await validate_task(TASK, scheduled("1100", tmp_path / "again"), skip=())
    assert (
        verdict.admitted and verdict.proposer_reward == 1.0 and "calibrate" not in verdict.skipped
    )


async def test_no_solver_skips_and_a_broken_solver_is_infrastructure(engine_ready):
    result = await run_stage("calibrate", TASK, GateConfig())
    assert result.skipped and "no solver configured" in result.reason
    result = await run_stage("calibrate", TASK, GateConfig(solver="no_such_module:Agent"))
    assert result.infrastructure_error and "0 of 4 solver rollouts finished" in result.reason
