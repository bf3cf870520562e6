"""One flywheel round with a scripted policy (both roles), everything else real."""

from __future__ import annotations

import json
import shutil
import statistics

from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.tools.agents.brief import ProposerBrief
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.pool import Pool
from autoenvscaling.tools.tasks.snapshot import content_hash
from autoenvscaling.training.proposer.update import rejected_at

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

    records = [c for c in final["candidates"] if c.round == 1]
    assert sorted(c.admitted for c in records) == [False, True]
    rejected = next(c for c in records if not c.admitted)
    assert rejected.stage == "oracle" and rejected.proposer_reward == -1.0
    admitted = next(c for c in records if c.admitted)
    assert admitted.proposer_reward == 1.0
    verdict = json.loads(open(admitted.path + ".verdict.json").read())
    calibrate = next(s for s in verdict["stages"] if s["stage"] == "calibrate")
    assert not calibrate["skipped"] and calibrate["passed"]  # the scripted solver: mean 0.5

    run = tmp_path / "run"
    pool = Pool(run / "pool")
    assert admitted.task_id in [e.task_id for e in pool.entries()]
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
    # The stage each proposal reached, as proposer training reads it (the graded reward arm).
    assert sorted(str(rejected_at(a.metadata)) for a in proposer) == ["None", "oracle"]
    assert "training skipped" in metrics["training"]["reason"]
    report = (run / "reports" / "round-01.md").read_text()
    assert "| admitted | 1 |" in report and "oracle: 1" in report

    # How each role behaved, from the same store: the solver calls a tool on its first turn
    # and then replies "Done." in every attempt; this arm offers the proposer no tools.
    activity = {(a["role"], a["purpose"]): a for a in metrics["agent_activity"]}
    assert set(activity) == {
        ("proposer", ""),
        ("solver", "baseline"),
        ("solver", "calibration"),
        ("solver", "refresh"),
    }
    for (role, purpose), row in activity.items():
        mine = [
            a
            for a in attempts
            if a.role == role and (role == "proposer" or a.metadata.get("purpose") == purpose)
        ]
        assert row["attempts"] == len(mine)
        if role == "solver":
            assert (row["tool_calls"], row["turns"]) == (len(mine), 2 * len(mine))
            assert row["turn_tool_call_rate"] == 0.5 and row["attempt_tool_call_rate"] == 1
            assert row["stop_reasons"] == {"done": len(mine)}
    proposer_row = activity[("proposer", "")]
    assert not proposer_row["tools_offered"] and proposer_row["tool_calls"] == 0
    assert (proposer_row["submitted"], proposer_row["admitted"]) == (2, 1)
    assert metrics["warnings"] == [] and "Warning:" not in report
    assert "| solver (calibration) | 4 | 8 | 4 (50%) | 4 (100%) | 1 | " in report

    # Experience from round one: the pool was measured before the proposers ran (its own tag,
    # round 0), and round one's brief already holds those attempts.
    baseline = [a for a in attempts if a.metadata.get("purpose") == "baseline"]
    assert baseline and all(a.round == 0 and a.outcome is not None for a in baseline)
    brief = final["brief"]  # flywheel state holds models
    assert isinstance(brief, ProposerBrief)
    rates = {r.task_id: r for r in brief.task_rates}
    assert rates["word-count"].attempts == len(baseline)
    # Calibration rollouts are recorded too, each linked to its candidate, with its reward.
    calibration = [a for a in attempts if a.metadata.get("purpose") == "calibration"]
    assert len(calibration) == 4 and all(a.reward is not None for a in calibration)
    assert {a.metadata["candidate"] for a in calibration} == {admitted.task_id}
    assert statistics.fmean(a.reward for a in calibration) == calibrate["details"]["mean"]

    # No --decontam: the stage says "not configured" (never "passed"), and so do the verdict,
    # the manifest and the round report.
    decontam = next(s for s in verdict["stages"] if s["stage"] == "decontam")
    assert (
        decontam["details"]["status"] == "not_configured" and "not configured" in decontam["reason"]
    )
    assert verdict["not_configured"] == ["decontam"] and "NOT RUN" in verdict["reason"]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["config"]["decontamination"].startswith("NOT CONFIGURED")
    # The manifest holds the served episode and the GRPO one, budget for budget.
    episodes, config = manifest["config"]["episodes"], manifest["config"]
    assert episodes["grpo"]["max_reply_tokens"] == episodes["served_solver"]["max_tokens_per_reply"]
    assert episodes["grpo"]["max_reply_tokens"] == config["max_tokens"]
    assert episodes["grpo"]["max_turns"] == config["solver_max_turns"]
    assert episodes["grpo"]["temperature"] == config["temperature"]
    assert "Decontamination: NOT CONFIGURED" in report
    assert "solver mean reward, held-out" not in report  # no held-out set: no number shown

    # Admission is bound to bytes: the pool holds exactly the checked bytes, hash recorded.
    entry = next(e for e in pool.entries() if e.task_id == admitted.task_id)
    assert entry.content_hash == verdict["content_hash"] == admitted.content_hash
    assert content_hash(pool.path(entry.task_id)) == entry.content_hash
