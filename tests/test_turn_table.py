"""The run report's "Did the loop turn?" table, from a real store and pool: round N's brief cites
round N-1's failed rollouts (or says it does not), GRPO groups with reward variance per role, the
weight change per role and the proposers' submissions (by `submit` apart from autosubmitted)."""

from __future__ import annotations

from pathlib import Path

from autoenvscaling.tools.agents.brief import build_brief
from autoenvscaling.tools.report.activity import GrpoGroups, RoleActivity
from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.report.run_report import save_history, write_run_report
from autoenvscaling.tools.rollouts.store import RolloutStore

from .conftest import REPO


def _failed(store: RolloutStore, task: str, round_: int) -> None:
    attempt_id = store.start_attempt(task_id=task, round=round_, policy_version="base")
    store.add_step(attempt_id, 0, tool_name="run", tool_output="boom", exit_code=1)
    store.finish_attempt(attempt_id, reward=0.0, outcome="failed")


def test_round_two_brief_cites_round_one_and_the_table_says_so(tmp_path: Path) -> None:
    pool = REPO / "tasks" / "starter"
    with RolloutStore(tmp_path / "rollouts.db") as store:
        _failed(store, "count-lines", 0)  # the baseline
        first = build_brief(store, pool, round=1)
        second_before = build_brief(store, pool, round=2)
        _failed(store, "sum-numbers", 1)
        second = build_brief(store, pool, round=2)
    assert first.evidence().cites_previous_round  # round 1 cites the baseline (round 0)
    assert not second_before.evidence().cites_previous_round  # only round 0 evidence yet
    evidence = second.evidence()
    assert evidence.cites_previous_round and evidence.failure_rounds == [0, 1]

    history = [
        RoundMetrics(
            round=2,
            candidates=2,
            admitted=1,
            reject_reasons={"nop": 1},
            pool_active=9,
            pool_retired=1,
            agent_activity=[
                RoleActivity(role="proposer", attempts=2, submitted=2, autosubmitted=1, admitted=1)
            ],
            grpo_groups=[
                GrpoGroups(role="proposer", groups=1, without_reward_variance=0),
                GrpoGroups(role="solver", groups=2, without_reward_variance=1),
            ],
            training={"param_change_l2": 0.0123, "proposer": {"param_change_l2": 0.5}},
            brief_evidence=evidence.model_dump(),
            stage_seconds={"round_total": 555.4},
        )
    ]
    save_history(tmp_path / "reports", history)
    table = write_run_report(tmp_path).read_text().split("## Did the loop turn?")[1]
    row = next(r for r in table.splitlines() if r.startswith("| 2 "))
    assert row == (
        "| 2 | 1 / 1 / 2 | 1 | nop: 1 | 1 of 1 / 1 of 2 | 0.5 / 0.0123 | 9 / 1 "
        "| yes (2 failures from rounds [0, 1]) | 555 |"
    )
