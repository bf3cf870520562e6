"""One flywheel round with a scripted policy (both roles), everything else real."""

from __future__ import annotations

import json
import shutil
import statistics

from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.flywheel import FlywheelContext, build_flywheel
from autoenvscaling.graphs.scripted_model import register
from autoenvscaling.tools.pool import Pool
from autoenvscaling.tools.rollout_store import RolloutStore

from .conftest import FIXTURES
from .flywheel_policy import shared_policy


async def test_one_round_admits_rejects_measures_and_reports(engine_ready, tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=2,
        arm="error_feedback",
        policy_model=register("flywheel-policy", shared_policy()),
        seed_dir=str(seed),
        train=False,
        max_revisions=1,
        refresh_attempts=2,
        calibration_rollouts=4,
        solver_max_turns=3,
        proposer_max_turns=4,
    )
    graph = build_flywheel(checkpointer=InMemorySaver())
    final = await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 500}, context=ctx
    )

    records = [c for c in final["candidates"] if c["round"] == 1]
    assert sorted(c["admitted"] for c in records) == [False, True]
    rejected = next(c for c in records if not c["admitted"])
    assert rejected["stage"] == "oracle" and rejected["proposer_reward"] == -1.0
    admitted = next(c for c in records if c["admitted"])
    assert admitted["proposer_reward"] == 1.0
    verdict = json.loads(open(admitted["path"] + ".verdict.json").read())
    calibrate = next(s for s in verdict["stages"] if s["stage"] == "calibrate")
    assert not calibrate["skipped"] and calibrate["passed"]  # the scripted solver: mean 0.5

    run = tmp_path / "run"
    pool = Pool(run / "pool")
    assert admitted["task_id"] in [e.task_id for e in pool.entries()]
    metrics = json.loads((run / "reports" / "metrics.json").read_text())[0]
    with RolloutStore(run / "rollouts.db") as store:
        attempts = store.list_attempts(limit=10_000)
    proposer = [a for a in attempts if a.role == "proposer"]
    refresh = [a for a in attempts if a.role == "solver" and a.metadata.get("purpose") == "refresh"]
    # The report's numbers are the store's numbers.
    assert (metrics["admitted"], metrics["scored"], metrics["reject_reasons"]) == (
        1,
        2,
        {"oracle": 1},
    )
    assert metrics["proposer_tokens"] == sum(
        a.prompt_tokens + a.completion_tokens for a in proposer
    )
    assert metrics["solver_attempts"] == len(refresh) == 2 * 2  # 2 pool tasks x 2 attempts
    assert metrics["solver_mean_reward_pool"] == statistics.fmean(a.reward for a in refresh)
    assert sorted(a.reward for a in proposer) == [-1.0, 1.0]
    assert "training skipped" in metrics["training"]["reason"]
    report = (run / "reports" / "round-01.md").read_text()
    assert "| admitted | 1 |" in report and "oracle: 1" in report
