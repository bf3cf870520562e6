"""Honest numbers: a pool task retires only when the 95% interval of its success rate lies
wholly outside the difficulty band (tools/stats.py), a missing value is
shown as missing (a gap in a plot, "-" or "n/a" in a table, never 0), and the training headline
names the checkpoint each role is served.

Two one-round flywheel runs with a scripted policy whose solver never acts (the replies are the
only scripted thing; trials, verifier, pool and reports are real) measure the same seed task with
one and with twelve samples; the reports are built from the first run's own metrics.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.flywheel.state import TrainingSummary
from autoenvscaling.graphs.models import Policy
from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.report.run_report import (
    load_history,
    plotted_series,
    round_markdown,
    rounds_figure,
    save_history,
    write_run_report,
)
from autoenvscaling.tools.tasks.pool import Pool, PoolEntry

from .conftest import FIXTURES

TASK = "word-count"


def _gives_up():
    """Both roles answer with text only: the solver never runs a command, so the verifier scores
    every attempt 0, a valid sample below the band (0.25, 0.75)."""
    from langchain_core.messages import AIMessage

    return lambda messages: AIMessage(content="I cannot do this.")


async def _one_round(tmp_path: Path, **settings: Any) -> tuple[dict[str, Any], list[Any]]:
    """One round with only the refresh's trials (no proposal, no baseline, no training);
    (final state, the train node's updates)."""
    from autoenvscaling.graphs.agent.scripted_model import register
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.builder import build_flywheel

    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / TASK)
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=0,
        policy_model=register(f"gives-up-{tmp_path.name}", _gives_up()),
        seed_dir=str(seed),
        train=False,
        baseline_tasks=0,
        solver_max_turns=2,
        **settings,
    )
    graph = build_flywheel(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    trained = []
    async for chunk in graph.astream({"rounds": 1}, config, context=ctx, stream_mode="updates"):
        if "train" in chunk:
            trained.append(chunk["train"]["training"])
    return (await graph.aget_state(config)).values, trained


def _y(line: Any) -> list[float]:
    return [float(v) for v in line.get_ydata()]


@pytest.mark.timeout(600)
async def test_one_valid_sample_measures_the_task_but_never_retires_it(engine_ready, tmp_path):
    """The embedded preset's old refresh (one attempt): the task is measured (0, n=1), stays
    active, and the round report says it is undecided with the count. The run's report shows
    the values the run did not measure as missing, and the headline names what is served."""
    from autoenvscaling.graphs.agent.scripted_model import register

    apart = register("apart-proposer", _gives_up())
    final, trained = await _one_round(
        tmp_path, refresh_attempts=1, policy_checkpoint_id="ck-1", proposer_model=apart
    )
    run = tmp_path / "run"
    (entry,) = Pool(run / "pool").entries()
    assert entry.status == "active" and entry.retired_reason is None
    assert [(p.round, p.mean_reward, p.n) for p in entry.history] == [(1, 0.0, 1)]
    (metrics,) = load_history(run / "reports")
    assert metrics.solver_attempts == 1 and metrics.solver_mean_reward_pool == 0.0
    assert metrics.pool_undecided == {TASK: 1}
    assert (metrics.pool_active, metrics.pool_retired) == (1, 0)
    report = (run / "reports" / "round-01.md").read_text()
    assert "| pool tasks measured but undecided (too few valid samples; kept) | 1 |" in report
    assert (
        "measured but undecided, kept: out of the band by their mean, not by their 95% interval "
        f"({TASK}: solver success 0.00 [95% CI 0.00-0.79, n=1] overlaps the band [0.25, 0.75]: "
        "kept; 11 more sample(s) at this rate would decide)" in report
    )

    # The headline and the report name what each role is served: the solver the policy's
    # checkpoint, the proposer the model it is configured apart with.
    (summary,) = trained
    assert summary.served == {"proposer": apart, "solver": "ck-1"}
    assert summary.headline().startswith(f"serving proposer: {apart}, solver: ck-1; ")
    assert metrics.served == {"proposer": apart, "solver": "ck-1"}
    assert f"Served after training: proposer `{apart}`, solver `ck-1`" in report
    assert final["policy"].checkpoint_id == "ck-1"

    # Nothing was proposed or trained and no held-out set was given: missing, never 0.
    assert metrics.valid_environment_rate is None and not metrics.heldout_configured
    assert "reward_mean" not in metrics.training
    assert "| valid-environment rate | - |" in report
    run_md = write_run_report(run).read_text()
    assert f"| 1 | 0 | 0 | - | 0 | 0 | n/a | 1 | {apart} / ck-1 |" in run_md, run_md
    # No round measured them: no line at all (an empty panel), and the measured 0 is a 0.
    fig = rounds_figure([metrics])
    plotted = {line.get_label(): _y(line) for ax in fig.axes for line in ax.get_lines()}
    assert plotted == {
        "pool active": [1.0],
        "pool retired": [0.0],
        "solver mean reward, pool": [0.0],
    }
    assert set(plotted_series([metrics])) == set(plotted)
    assert (run / "reports" / "rounds.png").stat().st_size > 0


@pytest.mark.timeout(600)
async def test_twelve_failures_put_the_interval_below_the_band_and_retire_the_task(
    engine_ready, tmp_path
):
    """0/12: the interval [0, 0.24] lies below the band [0.25, 0.75] (with 0/11 it reaches
    0.26 and the task would stay; tests/test_stats.py has the rule's arithmetic)."""
    final, trained = await _one_round(tmp_path, refresh_attempts=12)
    run = tmp_path / "run"
    (entry,) = Pool(run / "pool").entries()
    assert [(p.round, p.mean_reward, p.n) for p in entry.history] == [(1, 0.0, 12)]
    assert entry.status == "retired" and entry.retired_round == 1
    assert entry.retired_reason == (
        "solver success 0.00 [95% CI 0.00-0.24, n=12] lies wholly below the band [0.25, 0.75]"
    )
    (metrics,) = load_history(run / "reports")
    assert metrics.pool_undecided == {} and (metrics.pool_active, metrics.pool_retired) == (0, 1)
    report = (run / "reports" / "round-01.md").read_text()
    assert "| pool tasks measured but undecided (too few valid samples; kept) | 0 |" in report
    assert "undecided, kept" not in report
    assert trained[0].served == {"proposer": "base", "solver": "base"}
    assert final["round"] == 2


def test_a_missing_value_is_a_gap_in_the_plot_and_a_dash_in_the_table(tmp_path):
    """Round 2 scored no candidate, measured no pool task and trained nothing; the held-out set
    was configured from round 2 on and measured nothing there."""
    history = [
        RoundMetrics(
            round=1,
            scored=2,
            valid_environment_rate=0.5,
            solver_mean_reward_pool=0.25,
            training={"reward_mean": 0.5, "checkpoint": "ck-1"},
            served={"proposer": "ck-1", "solver": "ck-1"},
        ),
        RoundMetrics(
            round=2,
            training={"reason": "training skipped (train=false); the policy is unchanged"},
            heldout_configured=True,
            served={"proposer": "ck-1", "solver": "ck-1"},
        ),
        RoundMetrics(
            round=3,
            scored=1,
            valid_environment_rate=0.0,
            solver_mean_reward_pool=0.0,
            solver_mean_reward_heldout=0.75,
            heldout_configured=True,
            training={"reward_mean": 0.0, "param_change_l2": None},
            served={"proposer": "ck-3", "solver": "ck-3"},
        ),
    ]
    assert plotted_series(history) == {
        "valid-environment rate": [0.5, None, 0.0],
        "pool active": [0.0, 0.0, 0.0],
        "pool retired": [0.0, 0.0, 0.0],
        "solver mean reward, pool": [0.25, None, 0.0],
        "solver mean reward, held-out": [None, None, 0.75],
        "GRPO episode reward (solver update)": [0.5, None, 0.0],
    }
    fig = rounds_figure(history)
    plotted = {line.get_label(): _y(line) for ax in fig.axes for line in ax.get_lines()}
    for name in (
        "valid-environment rate",
        "solver mean reward, pool",
        "GRPO episode reward (solver update)",
    ):
        first, missing, last = plotted[name]
        assert math.isnan(missing) and not math.isnan(first) and not math.isnan(last), name
    assert all(math.isnan(v) for v in plotted["solver mean reward, held-out"][:2])
    assert plotted["solver mean reward, held-out"][2] == 0.75

    reports = tmp_path / "reports"
    save_history(reports, history)
    overview, turned = write_run_report(tmp_path).read_text().split("## Did the loop turn?")
    rows = [r for r in overview.splitlines() if r.startswith("| 2 ")]
    assert rows == ["| 2 | 0 | 0 | - | 0 | - | - | 0 | ck-1 / ck-1 |"]
    # The loop's table: a round that measured nothing shows dashes, not zeros.
    rows = [r for r in turned.splitlines() if r.startswith("| 2 ")]
    assert rows == ["| 2 | - / - / 0 | 0 | - | - / - | - / - | 0 / 0 | - | - |"], rows
    round_3 = round_markdown(history[2])
    assert "- param_change_l2: n/a" in round_3 and "- reward_mean: 0.0" in round_3


def test_the_headline_names_the_checkpoint_each_role_is_served():
    """The solver's update published ck-s but its swap failed, so the proposer update's ck-p is
    what the training node served: the headline, the report and the run table name ck-p for
    both roles, never the stale ck-s."""
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.measure import served_checkpoints

    policy = Policy(model="openai:ck-p", checkpoint_id="ck-p", version="ck-p")
    served = served_checkpoints(FlywheelContext(), policy)
    assert served == {"proposer": "ck-p", "solver": "ck-p"}
    summary = TrainingSummary(
        solver={"checkpoint": "ck-s", "reason": "swap failed, the previous policy stays: boom"},
        proposer={"checkpoint": "ck-p", "served_as": "ck-p"},
        served=served,
    )
    assert summary.headline() == (
        "serving proposer: ck-p, solver: ck-p; "
        "solver update: swap failed, the previous policy stays: boom"
    )
    # The proposer's update published nothing, the solver's was served.
    both = TrainingSummary(
        solver={"checkpoint": "ck-s"},
        proposer={"reason": "proposer training is off for this run"},
        served=served_checkpoints(
            FlywheelContext(), policy.model_copy(update={"checkpoint_id": "ck-s"})
        ),
    )
    assert both.headline() == (
        "serving proposer: ck-s, solver: ck-s; proposer update: proposer training is off for "
        "this run"
    )
    # Before any swap both roles are served the base; a role configured apart, its own model.
    apart = served_checkpoints(FlywheelContext(solver_model="openai:other"), Policy())
    assert apart == {"proposer": "base", "solver": "openai:other"}

    metrics = RoundMetrics(round=1, training=summary.report(), served=served)
    assert "Served after training: proposer `ck-p`, solver `ck-p`" in round_markdown(metrics)
    assert "ck-s" not in round_markdown(metrics).split("## Training")[0]


def test_the_refresh_window_moves_on_each_round():
    from autoenvscaling.graphs.flywheel.measure import refresh_window

    entries = [PoolEntry(task_id=t) for t in "abcde"]
    ids = [[e.task_id for e in refresh_window(entries, r, 2)] for r in (1, 2, 3, 4)]
    assert ids == [["a", "b"], ["c", "d"], ["e", "a"], ["b", "c"]]
    assert refresh_window(entries, 7, 0) == entries
    assert refresh_window([], 1, 2) == []


def test_the_embedded_preset_measures_but_cannot_retire_in_one_refresh():
    """Two samples a task: a task that fails both is kept, pending (its interval reaches 0.66),
    and the round report says so; the interval rule needs 12 samples at 0/n."""
    from autoenvscaling.graphs.config import RunConfig, preset
    from autoenvscaling.graphs.flywheel.measure import min_valid
    from autoenvscaling.tools.tasks.pool import band_decision

    values = preset("embedded")
    ctx = RunConfig(**values)
    decision = band_decision([0.0] * values["refresh_attempts"], (ctx.band_low, ctx.band_high))
    assert not decision.retire and decision.pending and decision.samples_to_decide == 12
    assert min_valid(values["refresh_attempts"]) <= values["refresh_attempts"]
    # The refresh's trials per round stay at four (one sample on four tasks before).
    assert values["refresh_attempts"] * values["refresh_limit"] == 4
