"""Held-out evaluation in the flywheel: before round 1 and after every round, k samples per
held-out task with a 95% interval, in metrics.json and the reports; held-out tasks never reach
the pool, the proposers' brief or a GRPO batch. The model's replies are scripted
(tests/flywheel_policy.py); sandboxes, the store and the reports are real."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

import autoenvscaling.graphs.flywheel.training as role_training
from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.tools.report.run_report import write_run_report
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.stats import wilson
from autoenvscaling.tools.tasks.generator import generate
from autoenvscaling.tools.tasks.pool import Pool
from autoenvscaling.tools.tasks.snapshot import content_hash

from .conftest import FIXTURES
from .flywheel_policy import shared_policy

SAMPLES = 2


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_heldout_is_evaluated_before_round_1_and_after_each_round_and_never_trained_on(
    engine_ready, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    seed = tmp_path / "seed"
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    heldout = tmp_path / "heldout"
    names = [generate(f, 10_000).write(heldout).name for f in ("count-lines", "sort-numbers")]
    heldout_hashes = {content_hash(heldout / n) for n in names}

    # The GRPO jobs the training node plans, captured where they would go to TRL.
    jobs: list = []

    async def planned(role, backend, job, run, round_, summary, report):
        jobs.append(job)
        summary["reason"] = "test: the job was captured, not trained"
        return summary, None

    monkeypatch.setattr(role_training, "_train", planned)
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=2,
        proposals=0,
        policy_model=register("heldout-policy", shared_policy()),
        seed_dir=str(seed),
        heldout_dir=str(heldout),
        heldout_samples=SAMPLES,
        train=True,
        base_model="test-weights",  # never loaded: `_train` is the capture above
        refresh_attempts=2,
        baseline_attempts=1,
        solver_max_turns=2,
    )
    graph = build_flywheel(checkpointer=InMemorySaver())
    await graph.ainvoke(
        {"rounds": 2}, {"configurable": {"thread_id": "h"}, "recursion_limit": 500}, context=ctx
    )
    run = tmp_path / "run"

    # Every held-out evaluation: rounds 0 (before round 1), 1 and 2, k samples per task.
    with RolloutStore(run / "rollouts.db") as store:
        attempts = [
            a for a in store.list_attempts(limit=10_000) if a.metadata.get("purpose") == "heldout"
        ]
    assert sorted({a.round for a in attempts}) == [0, 1, 2]
    for round_ in (0, 1, 2):
        mine = [a for a in attempts if a.round == round_]
        assert sorted(a.task_id for a in mine) == sorted(names * SAMPLES)

    metrics = json.loads((run / "reports" / "metrics.json").read_text())
    assert [m["round"] for m in metrics] == [1, 2]
    assert metrics[0]["heldout_before"]["when"] == "before round 1"
    assert metrics[1]["heldout_before"] is None
    for m, round_ in zip(metrics, (1, 2), strict=True):
        evaluation = m["heldout"]
        assert evaluation["when"] == f"after round {round_}"
        assert (evaluation["tasks"], evaluation["samples_per_task"]) == (2, SAMPLES)
        scored = [a for a in attempts if a.round == round_ and a.outcome != "error"]
        successes = sum(1 for a in scored if (a.reward or 0) >= 1.0)
        # The report's numbers are the store's numbers, the interval Wilson's.
        assert (evaluation["samples"], evaluation["successes"]) == (len(scored), successes)
        low, high = wilson(successes, len(scored))
        assert (evaluation["interval_low"], evaluation["interval_high"]) == (
            pytest.approx(low, abs=1e-4),
            pytest.approx(high, abs=1e-4),
        )
        assert evaluation["confidence"] == 0.95
        assert sorted(r["task_id"] for r in evaluation["per_task"]) == sorted(names)
        assert "heldout" in m["stage_seconds"]
        assert m["splits"].startswith("disjoint, 0 shared")
        assert m["decontamination"].endswith(str(heldout))  # the gate checks against it

    report = (run / "reports" / "round-01.md").read_text()
    assert "## Held-out evaluation" in report and "| before round 1 |" in report
    assert "| after round 1 |" in report and "95%" in report
    run_md = write_run_report(run).read_text()
    assert "held-out success [95% interval]" in run_md and "Held-out success:" in run_md
    assert (run / "reports" / "rounds.png").is_file()
    manifest = json.loads((run / "manifest.json").read_text())
    assert [s["name"] for s in manifest["config"]["splits"]["splits"]] == [
        "cold_start",
        "pool_seed",
        "heldout",
    ]
    assert manifest["config"]["splits"]["overlaps"] == []

    # Never trained on: not in the pool, not in any GRPO job the training node planned.
    pool = Pool(run / "pool")
    assert not {e.task_id for e in pool.entries()} & set(names)
    run_id = manifest["run_id"]
    solver_jobs = [j for j in jobs if j.job_id in (f"{run_id}-r01", f"{run_id}-r02")]
    assert len(solver_jobs) == 2  # one solver job per round
    for job in solver_jobs:
        dirs = [*job.task_dirs, *job.replay_task_dirs]
        assert dirs and all(Path(d).is_relative_to(run / "pool") for d in dirs)
        assert not {Path(d).name for d in dirs} & set(names)
        assert not {content_hash(d) for d in dirs} & heldout_hashes
