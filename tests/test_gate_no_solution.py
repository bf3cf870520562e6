"""A task without solution/solve.sh is rejected at lint, scored -1, never "not judged".

Found in a measured embedded round: a proposer's task without a solution passed lint and build,
then the oracle trial raised "Solution script not found", read as an infrastructure failure, so
the proposer got no reward instead of -1 - a way to dodge every rejection, as `gpus = 1` was.
Harbor's format makes the solution optional; the gate, whose oracle must score 1.0, does not.
"""

from __future__ import annotations

import shutil

from autoenvscaling.tools.gate import GateConfig
from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.gate.pipeline import validate_task

from .conftest import FIXTURES


def no_solution(tmp_path):
    task = tmp_path / "word-count"
    shutil.copytree(FIXTURES / "good_task", task)
    shutil.rmtree(task / "solution")
    return task


async def test_the_gate_rejects_a_task_without_a_solution_with_a_reward(tmp_path):
    verdict = await validate_task(no_solution(tmp_path), GateConfig(), skip=())
    assert not verdict.admitted and verdict.stage == "lint", verdict.summary()
    assert verdict.proposer_reward == -1.0 and not verdict.infrastructure_error
    assert (
        "solution/solve.sh: [no-solution] missing: the gate's oracle stage runs it"
        in verdict.reason
    )
    # Nothing was built or run: lint decided.
    assert [s.stage for s in verdict.stages if not s.skipped] == ["lint"]


def test_without_an_oracle_to_run_the_solution_stays_optional(tmp_path):
    task = no_solution(tmp_path)
    assert lint_task(task).ok  # Harbor's format: a task may ship no solution
    assert not lint_task(task, needs_solution=True).ok
    assert [f.rule for f in lint_task(task, needs_solution=True).errors] == ["no-solution"]
