"""The training step plan: the round's admitted tasks are trained on first, replay fills the rest,
and the round report lists what each step used."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.report.run_report import round_markdown
from autoenvscaling.training.backend import TrainHyperParams, TrainJob
from autoenvscaling.training.grpo.trl_backend import plan_steps

from .conftest import FIXTURES

pytestmark = pytest.mark.timeout(60)


def test_admitted_tasks_take_the_first_slots() -> None:
    replay = [f"pool/t{i}" for i in range(10)]
    plan = plan_steps(["new/a", "new/b"], replay, steps=2, tasks_per_step=2, seed=3)
    assert plan[0] == ["new/a", "new/b"]  # admitted first, before any replay task
    assert len(plan[1]) == 2 and set(plan[1]) <= set(replay)
    # The replay order rotates with the seed (the round), so later rounds see other pool tasks.
    other = plan_steps(["new/a", "new/b"], replay, steps=2, tasks_per_step=2, seed=4)
    assert other[0] == plan[0] and other[1] != plan[1]


def test_with_the_embedded_budget_the_admitted_task_is_always_trained() -> None:
    """One group per step, two steps, a 16-task pool: the admitted task is step 1's group."""
    replay = [f"pool/t{i}" for i in range(16)]
    plan = plan_steps(["new/x"], replay, steps=2, tasks_per_step=1, seed=1)
    assert plan[0] == ["new/x"] and plan[1][0] in replay


def test_small_sets_cycle_without_repeating_inside_a_step() -> None:
    plan = plan_steps(["a"], ["b"], steps=3, tasks_per_step=2)
    assert plan == [["a", "b"]] * 3
    assert plan_steps(["a"], [], steps=2, tasks_per_step=1) == [["a"], ["a"]]
    assert plan_steps([], ["r"], steps=1, tasks_per_step=1) == [["r"]]
    assert plan_steps([], [], steps=2, tasks_per_step=2) == [[], []]
    # More admitted tasks than slots: the first ones are trained on, in order.
    assert plan_steps(["a", "b", "c"], ["r"], steps=1, tasks_per_step=2) == [["a", "b"]]


def test_worker_dataset_follows_the_plan(tmp_path: Path, shared_verifier_opt_in) -> None:
    """The GRPO worker's rows are the plan flattened (read unshuffled, tasks_per_step a step)."""
    from autoenvscaling.training.grpo.worker import dataset_rows

    folders = {}
    for name in ("admitted-one", "pool-a", "pool-b", "pool-c"):
        folders[name] = tmp_path / name
        shutil.copytree(FIXTURES / "good_task", folders[name])
    job = TrainJob(
        job_id="j",
        base_model="unused",
        task_dirs=[folders["admitted-one"]],
        replay_task_dirs=[folders[n] for n in ("pool-a", "pool-b", "pool-c")],
        work_dir=tmp_path / "work",
        hyper=TrainHyperParams(steps=2, tasks_per_step=2, seed=0),
    )
    rows = dataset_rows(job)
    assert len(rows) == 4
    assert Path(rows[0]["task_dir"]).name == "admitted-one"
    assert all(Path(r["task_dir"]).name.startswith("pool-") for r in rows[1:])
    assert rows[0]["prompt"][-1]["role"] == "user"


def test_round_report_lists_each_steps_tasks() -> None:
    metrics = RoundMetrics(
        round=1,
        training={"steps": 2, "step_tasks": [["r01-new", "seed-a"], ["r01-new", "seed-b"]]},
    )
    text = round_markdown(metrics)
    assert "- step 1: r01-new, seed-a" in text and "- step 2: r01-new, seed-b" in text
    assert "step_tasks" not in text
