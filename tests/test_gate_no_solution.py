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


async def test_a_solution_that_fills_its_disk_is_told_about_storage_mb(tmp_path):
    """The writable layer is a filesystem of storage_mb: a solution that writes past it fails
    with ENOSPC and scores 0. The verdict says why (the cap, not the logic), from the
    solution's own output, which the proposer never sees otherwise."""
    task = tmp_path / "word-count"
    shutil.copytree(FIXTURES / "good_task", task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("storage_mb = 2048", "storage_mb = 64"))
    solve = task / "solution" / "solve.sh"
    lines = solve.read_text().splitlines()
    solve.write_text(
        "\n".join([*lines[:2], "head -c 100M /dev/zero > /app/scratch.bin", *lines[2:]])
    )
    verdict = await validate_task(task, GateConfig(repeat=1), skip=("calibrate", "dedup"))
    assert not verdict.admitted and verdict.stage == "oracle", verdict.summary()
    assert verdict.proposer_reward == -1.0
    assert "No space left on device" in verdict.reason and "storage_mb" in verdict.reason, (
        verdict.reason
    )
