"""A round's few GRPO groups go where they can teach: replay tasks are drawn by the chance that a
group of them has reward variance, from the pool's own measures (baseline, refresh)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.training import replay_priority, solver_job
from autoenvscaling.graphs.models import Policy
from autoenvscaling.tools.run_dir import RunDir
from autoenvscaling.tools.stats import group_variance_chance
from autoenvscaling.tools.tasks.pool import Pool, PoolEntry
from autoenvscaling.training.grpo.trl_backend import plan_steps

from .conftest import FIXTURES

pytestmark = pytest.mark.timeout(60)


def test_the_chance_of_a_group_with_variance() -> None:
    # Unmeasured: a coin flip, so 4 rollouts all alike with chance 2 / 16.
    assert group_variance_chance(0, 0, 4) == pytest.approx(0.875)
    # 0 of 2: the rate is (0 + 1) / 4 = 0.25, not 0 ("never" is not known from two failures).
    assert group_variance_chance(0, 2, 4) == pytest.approx(1 - 0.25**4 - 0.75**4)
    # Symmetric: always solved teaches as little as never solved.
    assert group_variance_chance(2, 2, 4) == pytest.approx(group_variance_chance(0, 2, 4))
    # More failures, less chance; a bigger group, more.
    assert group_variance_chance(0, 8, 4) < group_variance_chance(0, 2, 4)
    assert group_variance_chance(0, 2, 8) > group_variance_chance(0, 2, 4)
    with pytest.raises(ValueError, match="at least 2 rollouts"):
        group_variance_chance(0, 0, 1)
    with pytest.raises(ValueError, match="successes must lie"):
        group_variance_chance(3, 2, 4)


def test_the_plan_draws_the_likeliest_replay_first_and_rotates_ties() -> None:
    replay = [f"pool/t{i}" for i in range(8)]
    priority = {f"t{i}": 0.5 for i in range(8)} | {"t5": 0.9, "t2": 0.7}
    for seed in range(5):
        plan = plan_steps([], replay, steps=3, tasks_per_step=1, seed=seed, priority=priority)
        assert plan[0] == ["pool/t5"] and plan[1] == ["pool/t2"], (seed, plan)
    # Among equals the round's shuffle still decides: later rounds see other tasks.
    thirds = {
        plan_steps([], replay, steps=3, tasks_per_step=1, seed=s, priority=priority)[2][0]
        for s in range(5)
    }
    assert len(thirds) > 1
    # Admitted tasks still come first, whatever the replay's priority.
    plan = plan_steps(["new/a"], replay, steps=2, tasks_per_step=1, seed=0, priority=priority)
    assert plan == [["new/a"], ["pool/t5"]]


def test_a_round_job_orders_replay_by_the_pools_measures(
    tmp_path: Path, shared_verifier_opt_in
) -> None:
    """From a real pool's recorded measures to the GRPO worker's dataset rows: a task failed
    4 times of 4 is trained after one never measured and one solved once in two."""
    from autoenvscaling.training.grpo.worker import dataset_rows

    run = RunDir(tmp_path / "run")
    pool = Pool(run.pool)
    for name in ("always-failed", "half-solved", "unmeasured"):
        pool.add(FIXTURES / "good_task", PoolEntry(task_id=name, source="seed"))
    pool.record_eval("always-failed", 0, [0.0, 0.0])
    pool.record_eval("always-failed", 1, [0.0, 0.0])
    pool.record_eval("half-solved", 1, [1.0, 0.0])
    replay = [e.task_id for e in pool.entries("active")]
    priority = replay_priority(pool.entries("active"), group=4)
    assert priority["always-failed"] < priority["half-solved"] == priority["unmeasured"]

    ctx = FlywheelContext(
        run_dir=str(run.root), base_model="some/model", train_steps=3, train_tasks_per_step=1
    )
    policy = Policy.serving("m", "http://127.0.0.1:1/v1", "auto", None)
    for round_ in (1, 2, 3):
        job = solver_job(ctx, run, "run", round_, policy, [], replay, priority)
        rows = dataset_rows(job)
        names = [Path(r["task_dir"]).name for r in rows]
        assert names[-1] == "always-failed", (round_, names)
        assert set(names[:2]) == {"half-solved", "unmeasured"}
