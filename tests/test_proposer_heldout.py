"""The proposer's held-out evaluation in a flywheel round: a scripted policy (both roles),
everything else real (the proposer's attempt graph, the gate's builds and trials, the stores).

What it pins: the held-out point serves the proposer briefs built on the held-out folder (their
examples are its tasks, and no training brief shows one); the point is recorded apart from the
run's proposer attempts (no proposer update can read it); the stage each attempt stopped at
gives the rates; a round that left the policy unchanged reuses the point and says so; the
report and the curve show it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.graphs.flywheel.proposer_heldout import FOLDER
from autoenvscaling.tools.report.curve import build_curve
from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.rollouts.store import RolloutStore

from .conftest import FIXTURES, REPO
from .flywheel_policy import BROKEN, FILES, blocks, shared_policy

HELDOUT = ("count-lines-10000", "replace-word-10001")


async def test_the_proposer_is_measured_on_held_out_briefs_apart_from_training(
    engine_ready, tmp_path
):
    seed, heldout = tmp_path / "seed", tmp_path / "heldout"
    seed.mkdir()
    heldout.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    for name in HELDOUT:
        shutil.copytree(REPO / "tasks" / "generated" / "heldout" / name, heldout / name)
    briefs: list[str] = []
    solver_and_training = shared_policy()

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        brief = next((str(m.content) for m in messages if isinstance(m, HumanMessage)), "")
        if any(name in brief for name in HELDOUT):
            briefs.append(brief)  # a held-out brief: its examples are the held-out tasks
            return blocks(FILES if "proposal 1 of" in brief else BROKEN)
        return solver_and_training(messages)

    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=1,
        arm="error_feedback",
        policy_model=register("proposer-heldout-policy", respond),
        seed_dir=str(seed),
        heldout_dir=str(heldout),
        heldout_samples=0,
        proposer_heldout_briefs=2,
        proposer_heldout_samples=1,
        brief_examples=1,
        train=False,
        max_revisions=0,
        baseline_tasks=0,
        refresh_attempts=0,
        calibration_rollouts=2,
        solver_max_turns=3,
        proposer_max_turns=4,
    )
    graph = build_flywheel(checkpointer=InMemorySaver())
    await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 500}, context=ctx
    )

    run = tmp_path / "run"
    [metrics] = [
        RoundMetrics.model_validate(m)
        for m in json.loads((run / "reports" / "metrics.json").read_text())
    ]
    before, after = metrics.proposer_heldout_before, metrics.proposer_heldout
    assert before is not None and after is not None
    # Two briefs, one example each, drawn from the held-out folder, one per brief.
    assert sorted(e for r in before.rows for e in r.examples) == sorted(HELDOUT)
    assert len(briefs) == 2 and all(any(n in b for n in HELDOUT) for b in briefs)
    # Brief 1's task is sound; brief 2's reference solution has a planted bug: both pass lint,
    # one is solved by its oracle.
    by_brief = {r.brief: r for r in before.rows}
    assert by_brief[0].stage not in ("lint", "build", "oracle") and by_brief[1].stage == "oracle"
    assert (before.passes_lint.mean, before.oracle_solves.mean, before.submitted.n) == (
        1.0,
        0.5,
        2,
    )
    assert [r.files_written for r in before.rows] == [5, 5]  # all five of a task's files
    # Untrained, the policy after round 1 is the same: its point is the one before, not served.
    assert after.reused_from == "before round 1" and after.rows == before.rows
    with RolloutStore(run / FOLDER / "rollouts.db") as store:
        evaluated = store.list_attempts(limit=100)
    assert sorted(a.id for a in evaluated) == sorted(r.attempt_id for r in before.rows)
    assert {a.round for a in evaluated} == {0}
    # The run's own store (what proposer training reads) holds only the round's proposal.
    with RolloutStore(run / "rollouts.db") as store:
        trained_on = [a for a in store.list_attempts(limit=100) if a.role == "proposer"]
    assert len(trained_on) == 1 and not {a.id for a in trained_on} & {a.id for a in evaluated}

    report = (run / "reports" / "round-01.md").read_text()
    assert "Proposer on held-out briefs, before round 1" in report
    assert "passes lint 1.00" in report and "oracle solves 0.50" in report
    assert "task files written 5.00 of 5" in report
    proposer = build_curve(run).proposer
    assert proposer is not None
    assert [p.passes_lint.mean for p in proposer.points] == [1.0, 1.0]
    assert proposer.difference is not None and proposer.difference.difference == 0
