"""The GRPO seed changes with the round: TRL's sampling seed and the replay shuffle
(`plan_steps`) differ between rounds, so rounds neither redraw nor replay alike."""

from __future__ import annotations

from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.training import solver_job
from autoenvscaling.graphs.models import Policy
from autoenvscaling.tools.run_dir import RunDir
from autoenvscaling.training.grpo.trl_backend import plan_steps


def test_each_round_trains_with_its_own_seed(tmp_path):
    run = RunDir(tmp_path / "run")
    ctx = FlywheelContext(run_dir=str(run.root), base_model="some/model", train_tasks_per_step=1)
    policy = Policy.serving("m", "http://127.0.0.1:1/v1", "auto", None)
    replay = [f"t{i}" for i in range(8)]
    jobs = [solver_job(ctx, run, "run", r, policy, [], replay) for r in (1, 2, 3)]
    assert [job.hyper.seed for job in jobs] == [1, 2, 3]
    assert [job.job_id for job in jobs] == ["run-r01", "run-r02", "run-r03"]
    # The seed reaches the step plan: the replay order rotates from round to round.
    plans = [
        plan_steps([], job.replay_task_dirs, steps=2, tasks_per_step=1, seed=job.hyper.seed)
        for job in jobs
    ]
    assert len({tuple(map(tuple, plan)) for plan in plans}) == 3, plans
