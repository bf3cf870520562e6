"""The round report says how each role behaved: tool calls, stop reasons, submissions, GRPO groups
without reward variance, and a plain warning when a role never called a tool.

Unit tests compute the numbers over a real SQLite rollout store built here; one flywheel round
with a scripted policy that never calls a tool (real engine, real Harbor trials) shows the warnings
end to end. tests/test_flywheel.py checks the opposite: a policy that calls tools gets none.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.tools.report.activity import grpo_groups
from autoenvscaling.tools.report.metrics import RoundMetrics, round_metrics
from autoenvscaling.tools.report.run_report import (
    load_history,
    round_markdown,
    save_history,
    write_run_report,
)
from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.pool import Pool

from .conftest import FIXTURES

RUN = "run-1"


def _attempt(id: str, role: str, *, round: int = 1, turns: int = 0, **meta) -> Attempt:
    return Attempt(
        id=id,
        run_id=RUN,
        round=round,
        role=role,  # type: ignore[arg-type]
        task_id=f"task-{id}",
        outcome=meta.pop("outcome", "failed"),
        reward=meta.pop("reward", 0.0),
        turns=turns,
        prompt_tokens=meta.pop("prompt_tokens", 0),
        completion_tokens=meta.pop("completion_tokens", 0),
        error=meta.pop("error", None),
        metadata=meta,
    )


# What graphs/proposer/record.py records when the prompt filled the context window (measured on the
# embedded default: 8169 prompt tokens of 8192, a 23-token reply, then the window was full).
FULL = (
    "never submitted: stopped at max_tokens (the conversation exceeded the model's context "
    "window: Error code: 400 - requested tokens exceed context window of 8192)"
)


def _silent(n: int) -> list[Step]:
    """`n` model replies that called no tool."""
    return [Step(index=i, message="I will think about it.") for i in range(n)]


def _calls(n: int, *, then_reply: bool = True) -> list[Step]:
    steps = [Step(index=i, tool_name="run", tool_args={"command": "ls"}) for i in range(n)]
    return steps + ([Step(index=n, message="Done.")] if then_reply else [])


def _store(path: Path, proposer_calls: bool) -> None:
    """Two terminal-arm proposers (8 turns in all), solver attempts for three purposes."""
    with RolloutStore(path) as store:
        for i in range(2):
            steps = _calls(2, then_reply=False) if proposer_calls else _silent(4)
            silent = {} if proposer_calls else {"error": FULL}
            store.record_attempt(
                _attempt(
                    f"p{i}",
                    "proposer",
                    turns=4,
                    arm="terminal",
                    stop_reason="max_turns" if proposer_calls else "max_tokens",
                    submitted=False,
                    reward=-1.0,
                    prompt_tokens=4 * 8000,
                    completion_tokens=4 * 20,
                    **silent,
                ),
                steps,
            )
        # Baseline (round 0, shown in round one's report): two calls then a closing reply.
        store.record_attempt(
            _attempt(
                "b0", "solver", round=0, purpose="baseline", stop_reason="done", model_turns=3
            ),
            _calls(2),
        )
        # Refresh: one attempt called a tool (stopped by max_turns), one never did.
        store.record_attempt(
            _attempt("r0", "solver", purpose="refresh", stop_reason="max_turns", model_turns=2),
            _calls(2, then_reply=False),
        )
        store.record_attempt(
            _attempt("r1", "solver", purpose="refresh", stop_reason="done", model_turns=1),
            _silent(1),
        )
        # Calibration finished without a recorded stop reason (an older row): "unrecorded".
        store.record_attempt(
            _attempt("c0", "solver", purpose="calibration", outcome="solved", reward=1.0),
            _calls(1),
        )
        # Another run's attempt and a still-running one are never counted.
        store.record_attempt(
            _attempt("x0", "solver", purpose="refresh").model_copy(update={"run_id": "other"}),
            _calls(5),
        )
        store.start_attempt(id="running", task_id="t", run_id=RUN, round=1, role="solver")


def _metrics(tmp_path: Path, *, proposer_calls: bool, training: dict | None = None):
    _store(tmp_path / "rollouts.db", proposer_calls)
    return round_metrics(
        1, [], tmp_path / "rollouts.db", Pool(tmp_path / "pool"), RUN, training=training
    )


@pytest.mark.timeout(60)
def test_a_proposer_that_never_calls_a_tool_is_named_in_metrics_and_report(tmp_path):
    m = _metrics(tmp_path, proposer_calls=False)
    rows = {a.label: a for a in m.agent_activity}
    assert list(rows) == [
        "proposer",
        "solver (baseline)",
        "solver (calibration)",
        "solver (refresh)",
    ]
    p = rows["proposer"]
    assert (p.attempts, p.turns, p.tool_calls, p.turns_with_tool_call) == (2, 8, 0, 0)
    assert (p.turn_tool_call_rate, p.attempt_tool_call_rate, p.mean_tool_calls) == (0, 0, 0)
    assert p.stop_reasons == {"max_tokens": 2} and (p.submitted, p.admitted) == (0, 0)
    refresh = rows["solver (refresh)"]
    assert (refresh.attempts, refresh.turns, refresh.turns_with_tool_call) == (2, 3, 2)
    assert (refresh.tool_calls, refresh.attempts_with_tool_call, refresh.mean_tool_calls) == (
        2,
        1,
        1.0,
    )
    assert refresh.turn_tool_call_rate == pytest.approx(2 / 3)
    assert refresh.stop_reasons == {"max_turns": 1, "done": 1}
    assert rows["solver (baseline)"].turns == 3 and rows["solver (baseline)"].tool_calls == 2
    calibration = rows["solver (calibration)"]
    # No model_turns recorded: the turns are the steps (one call, one closing reply).
    assert (calibration.turns, calibration.stop_reasons) == (2, {"unrecorded": 1})

    assert (p.prompt_tokens, p.completion_tokens, p.context_exceeded) == (64000, 160, 2)
    assert m.warnings == [
        "proposer: 2 of 2 attempt(s) outgrew the model's context window (8000 / 20 tokens in / "
        "out per turn): the prompt leaves the model little or no room to answer",
        "proposer made 0 tool calls in 8 turns (2 attempt(s), stop reasons: max_tokens: 2): "
        "it never wrote a task",  # (so it never submitted either: one line says it)
    ]
    report = round_markdown(m)
    # The warning heads the report, before any number.
    assert report.index("> **Warning:** proposer made 0 tool calls in 8 turns") < report.index(
        "| candidates |"
    )
    assert "## Agent behaviour" in report
    row = "| proposer | 2 | 8 | 0 (0%) | 0 (0%) | 0 | 8000 / 20 | max_tokens: 2 | 0 / 0 / 0 |"
    assert row in report
    assert (
        "| solver (refresh) | 2 | 3 | 2 (67%) | 1 (50%) | 1 | 0 / 0 | done: 1, max_turns: 1 | - |"
        in report
    )

    # metrics.json keeps the old keys, adds the new ones, and reads back as the same model.
    save_history(tmp_path / "reports", [m])
    saved = json.loads((tmp_path / "reports" / "metrics.json").read_text())[0]
    assert {"admitted", "solver_attempts", "training", "notes"} <= set(saved)
    assert saved["agent_activity"][0]["turn_tool_call_rate"] == 0
    assert load_history(tmp_path / "reports") == [m]
    # The run report lists every round's warnings too.
    run_md = write_run_report(tmp_path).read_text()
    assert "- round 1: proposer made 0 tool calls in 8 turns" in run_md


@pytest.mark.timeout(60)
def test_a_proposer_that_calls_tools_gets_no_tool_warning(tmp_path):
    m = _metrics(tmp_path, proposer_calls=True)
    p = m.agent_activity[0]
    assert (p.role, p.tool_calls, p.turns_with_tool_call, p.attempts_with_tool_call) == (
        "proposer",
        4,
        4,
        2,
    )
    # It worked and still submitted nothing: that is what the report says instead.
    assert p.context_exceeded == 0
    assert m.warnings == ["proposer submitted 0 of 2 proposal(s): the gate judged nothing"]
    assert "Warning:** proposer made" not in round_markdown(m)


@pytest.mark.timeout(60)
def test_grpo_groups_without_reward_variance_come_from_the_training_summary(tmp_path):
    # The shape graphs/role_training.train_solver and train_proposer write.
    training = {
        "steps": 2,
        "groups": 2,
        "groups_without_reward_variance": 2,
        "proposer": {
            "groups": 1,
            "groups_dropped": ["2 proposals: all 2 proposals scored -1: zero advantage"],
        },
    }
    m = _metrics(tmp_path, proposer_calls=True, training=training)
    assert [(g.role, g.groups, g.without_reward_variance) for g in m.grpo_groups] == [
        ("solver", 2, 2),
        ("proposer", 2, 1),
    ]
    assert (
        "solver GRPO: all 2 group(s) had no reward variance: the update carried no learning signal"
        in m.warnings
    )
    assert not any(w.startswith("proposer GRPO") for w in m.warnings)
    assert "- GRPO, solver: 2 group(s), 2 without reward variance" in round_markdown(m)
    # Training that did not run plans no group: nothing shown, nothing warned.
    assert grpo_groups({"reason": "training skipped (train=false)"}) == []
    assert grpo_groups({"reason": "x", "proposer": {"reason": "proposer training is off"}}) == []


@pytest.mark.timeout(60)
def test_metrics_written_before_these_fields_still_load(tmp_path):
    old = {"round": 1, "admitted": 0, "training": {}, "notes": ["n"]}
    (tmp_path / "metrics.json").write_text(json.dumps([old]))
    (m,) = load_history(tmp_path)
    assert (m.agent_activity, m.grpo_groups, m.warnings) == ([], [], [])
    assert "## Agent behaviour" in round_markdown(RoundMetrics(round=1))


def _never_calls_a_tool():
    """Both roles reply with text only, whatever they are asked (the embedded model's failure);
    the proposer's third call finds the context window full, as the embedded server says it."""
    from langchain_core.messages import AIMessage, SystemMessage

    proposer_calls = []

    def respond(messages):
        proposer = "skilled terminal agent" not in str(messages[0].content)
        assert isinstance(messages[0], SystemMessage)
        if proposer:
            proposer_calls.append(1)
            if len(proposer_calls) > 2:
                raise ValueError("This model's maximum context length is 8192 tokens")
        return AIMessage(content="I would write a task here.")

    return respond


@pytest.mark.timeout(600)
async def test_a_round_whose_policy_never_calls_a_tool_warns_in_the_report(engine_ready, tmp_path):
    from autoenvscaling.graphs.agent.scripted_model import register
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.builder import build_flywheel

    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=1,
        arm="terminal",  # the proposer is offered tools (its sandbox starts on first use)
        policy_model=register("silent-policy", _never_calls_a_tool()),
        seed_dir=str(seed),
        train=False,
        max_revisions=0,
        baseline_tasks=1,
        refresh_attempts=1,
        solver_max_turns=2,
        proposer_max_turns=4,
    )
    await build_flywheel(checkpointer=InMemorySaver()).ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 200}, context=ctx
    )
    run = tmp_path / "run"
    (metrics,) = json.loads((run / "reports" / "metrics.json").read_text())
    rows = {(a["role"], a["purpose"]): a for a in metrics["agent_activity"]}
    proposer = rows[("proposer", "")]
    # Two turns (the reply, set aside and asked again: the same reply), then a full context.
    assert (proposer["attempts"], proposer["turns"], proposer["tool_calls"]) == (1, 2, 0)
    assert proposer["stop_reasons"] == {"max_tokens": 1} and proposer["context_exceeded"] == 1
    assert (proposer["submitted"], proposer["admitted"]) == (0, 0)
    for purpose in ("baseline", "refresh"):
        solver = rows[("solver", purpose)]
        assert (solver["attempts"], solver["tool_calls"], solver["turns"]) == (1, 0, 1)
        assert solver["stop_reasons"] == {"done": 1}
    # The numbers are the store's.
    with RolloutStore(run / "rollouts.db") as store:
        attempts = store.list_attempts(limit=1000)
        steps = [s for a in attempts for s in store.trajectory(a.id).steps]
    assert len(attempts) == 3 and steps and not any(s.tool_name for s in steps)

    report = (run / "reports" / "round-01.md").read_text()
    for line in (
        "proposer: 1 of 1 attempt(s) outgrew the model's context window (",
        "proposer made 0 tool calls in 2 turns (1 attempt(s), stop reasons: max_tokens: 1): "
        "it never wrote a task",
        "solver (baseline) made 0 tool calls in 1 turn (",
        "solver (refresh) made 0 tool calls in 1 turn (",
    ):
        assert f"> **Warning:** {line}" in report, report


@pytest.mark.timeout(60)
def test_an_autosubmitted_proposal_is_said_to_be_one(tmp_path):
    """A proposer that wrote its task as <file> blocks and never called `submit` reached the
    gate by autosubmission: the report says both, not "it never wrote a task"."""
    with RolloutStore(tmp_path / "rollouts.db") as store:
        for i, auto in enumerate((True, False)):
            store.record_attempt(
                _attempt(
                    f"p{i}",
                    "proposer",
                    turns=3,
                    arm="terminal",
                    stop_reason="max_turns",
                    submitted=auto,
                    autosubmitted=auto,
                    set_aside=2 * auto,
                    reward=-1.0,
                ),
                _silent(3),
            )
    m = round_metrics(1, [], tmp_path / "rollouts.db", Pool(tmp_path / "pool"), RUN)
    p = m.agent_activity[0]
    assert (p.submitted, p.autosubmitted) == (1, 1)
    assert any("it wrote files only as <file> blocks" in w for w in m.warnings), m.warnings
    assert any("1 of 2 proposal(s) reached the gate by autosubmission" in w for w in m.warnings)
    assert p.set_aside == 2
    # The behaviour table keeps them apart: by `submit` / autosubmitted / admitted.
    assert "| 0 / 1 / 0 |" in round_markdown(m).split("## Agent behaviour")[1]
    assert any("2 of 6 turn(s) wrote nothing before the first file" in w for w in m.warnings), (
        m.warnings
    )
    assert any(w.endswith("the proposer update trains each at -1") for w in m.warnings)


def test_proposer_episodes_cut_by_the_update_are_counted_in_the_round_report(tmp_path):
    """The proposer update's completion length cuts long episodes: the round's metrics hold the
    count, the report shows it in its training section, and a warning heads it when any was cut."""
    RolloutStore(tmp_path / "rollouts.db").close()
    cut = {
        "max_completion_tokens": 1024,
        "episodes": 4,
        "truncated": 3,
        "model_tokens": 2000,
        "model_tokens_cut": 500,
    }
    training = {"proposer": {"groups": 2, "truncation": cut}}
    m = round_metrics(
        1, [], tmp_path / "rollouts.db", Pool(tmp_path / "pool"), RUN, training=training
    )
    assert m.proposer_truncation is not None and m.proposer_truncation.truncated == 3
    shown = (
        "3 of 4 episode(s) cut to 1024 completion tokens; "
        "500 of the model's 2000 tokens (25%) untrained"
    )
    assert any(w.startswith(f"proposer GRPO: {shown}") for w in m.warnings), m.warnings
    report = round_markdown(m)
    assert f"Proposer update, episodes cut: {shown}" in report.split("## Training")[1]
    # Nothing cut: counted, no warning; no proposer update: nothing shown.
    m = round_metrics(
        1,
        [],
        tmp_path / "rollouts.db",
        Pool(tmp_path / "pool"),
        RUN,
        training={"proposer": {"truncation": {**cut, "truncated": 0, "model_tokens_cut": 0}}},
    )
    assert m.proposer_truncation is not None and not any("cut to" in w for w in m.warnings)
    m = round_metrics(1, [], tmp_path / "rollouts.db", Pool(tmp_path / "pool"), RUN)
    assert m.proposer_truncation is None and "episodes cut" not in round_markdown(m)
