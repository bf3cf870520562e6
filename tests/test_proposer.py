"""The proposer role end to end: scripted model replies, everything else real (MCP tools, the
workspace sandbox, the gate's builds and Harbor trials, the SQLite rollout store)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from typer.testing import CliRunner

from autoenvscaling.graphs.agent.loop import LoopBudget
from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.proposer.builder import ProposerContext, build_proposer_graph
from autoenvscaling.graphs.proposer.record import propose
from autoenvscaling.graphs.proposer.settings import ProposerSettings
from autoenvscaling.tools.agents.brief import build_brief
from autoenvscaling.tools.gate import GateConfig
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.training.proposer.update import plan_proposer_update

from .conftest import SEED_DIR
from .flywheel_policy import BROKEN, BUG, FIX, blocks

# A small task; its reference solution carries a planted bug (it sums only the first 3 numbers).
FILES = BROKEN
# Replays the Dockerfile by hand in the proposer's own sandbox, then the solution and the tests.
TRY_IT = (
    "mkdir -p /app /logs/verifier && cp environment/numbers.txt /app/ && "
    "ln -sfn /workspace/task/tests /tests && bash solution/solve.sh && bash tests/test.sh; "
    "echo reward=$(cat /logs/verifier/reward.txt)"
)


_blocks = blocks


def _phased(
    phases: Sequence[Sequence[AIMessage | str]],
) -> Callable[[Sequence[BaseMessage]], AIMessage | str]:
    """A responder that plays phase k after the gate's k-th rejection, one reply per model call."""

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
        phase = sum("admission gate rejected" in str(messages[i].content) for i in humans)
        since = sum(isinstance(m, AIMessage) for m in messages[humans[-1] :])
        script = phases[min(phase, len(phases) - 1)]
        return script[since] if since < len(script) else "done"

    return respond


def _settings(tmp_path: Path, model: str, **update) -> ProposerSettings:
    base = {
        "model": ModelConfig(model=model),
        "store_path": str(tmp_path / "rollouts.db"),
        "run_id": "test",
        "budget": LoopBudget(max_turns=12, max_retries=1),
        "gate": GateConfig(backend="podman", repeat=1),
    }
    return ProposerSettings(**(base | update))


@pytest.fixture(scope="module")
def brief():
    return build_brief(None, SEED_DIR, n_examples=1)


async def test_terminal_proposer_fixes_a_planted_bug_after_the_gate_rejects_it(
    engine_ready, tmp_path, brief
):
    writes = [reply("", tool_call("write_file", path=p, content=c)) for p, c in FILES.items()]
    model = register(
        "proposer-terminal",
        _phased(
            [
                [
                    *writes,
                    reply("Try it.", tool_call("run", command=TRY_IT)),
                    reply("Submit.", tool_call("submit", summary="sum a column")),
                ],
                [
                    reply(
                        "The oracle failed; read the solution.",
                        tool_call("read_file", path="solution/solve.sh"),
                    ),
                    reply(
                        "It sums 3 lines only.",
                        tool_call(
                            "edit_file", path="solution/solve.sh", old_text=BUG, new_text=FIX
                        ),
                    ),
                    reply("", tool_call("run", command=TRY_IT)),
                    reply("", tool_call("check")),
                    reply("", tool_call("submit", summary="fixed")),
                ],
            ]
        ),
    )
    result = await propose(brief, _settings(tmp_path, model), out_dir=tmp_path / "cand")

    assert (result.admitted, result.reward, result.outcome, result.revisions) == (
        True,
        1.0,
        "solved",
        1,
    )
    assert [(g.stage, g.proposer_reward) for g in result.gates] == [("oracle", -1.0), (None, 1.0)]
    assert FIX in (Path(result.candidate) / "solution" / "solve.sh").read_text()
    with RolloutStore(tmp_path / "rollouts.db") as store:
        trajectory = store.trajectory(result.attempt_id)
    attempt = trajectory.attempt
    assert (attempt.role, attempt.reward, attempt.outcome) == ("proposer", 1.0, "solved")
    assert attempt.metadata["arm"] == "terminal" and attempt.metadata["revisions"] == 1
    assert attempt.category == "text-processing" and attempt.prompt_tokens > 0
    calls = [s for s in trajectory.steps if s.tool_name]
    names = [s.tool_name for s in calls]
    assert names.count("write_file") == len(FILES) and names.count("submit") == 2
    runs = [s.tool_output or "" for s in calls if s.tool_name == "run"]
    # The terminal really ran the files the filesystem tool wrote: the bug, then the fix.
    assert "reward=0" in runs[0] and "FAIL: expected 189" in runs[0]
    assert "reward=1" in runs[1] and "PASS" in runs[1]
    check = json.loads(next(s.tool_output for s in calls if s.tool_name == "check"))
    assert check["passed"] is True and "calibrate" not in [
        s["stage"] for s in check["stages"] if not s["skipped"]
    ]


async def test_error_feedback_arm_rewrites_after_the_gate_rejection(engine_ready, tmp_path, brief):
    fixed = {**FILES, "solution/solve.sh": FILES["solution/solve.sh"].replace(BUG, FIX)}
    model = register("proposer-files", _phased([[_blocks(FILES)], [_blocks(fixed)]]))
    result = await propose(
        brief, _settings(tmp_path, model, arm="error_feedback"), out_dir=tmp_path / "cand"
    )
    assert (result.admitted, result.reward, result.revisions, result.turns) == (True, 1.0, 1, 2)
    assert result.gates[0].stage == "oracle"
    with RolloutStore(tmp_path / "rollouts.db") as store:
        trajectory = store.trajectory(result.attempt_id)
    assert trajectory.attempt.metadata["arm"] == "error_feedback"
    assert trajectory.attempt.reward == 1.0 and len(trajectory.steps) == 2
    assert all(s.tool_name is None and "<file path=" in (s.message or "") for s in trajectory.steps)


async def test_prompt_only_arm_gets_one_reply_and_no_feedback(engine_ready, tmp_path, brief):
    fixed = {**FILES, "solution/solve.sh": FILES["solution/solve.sh"].replace(BUG, FIX)}
    model = register("proposer-once", _phased([[_blocks(FILES)], [_blocks(fixed)]]))
    result = await propose(
        brief, _settings(tmp_path, model, arm="prompt_only"), out_dir=tmp_path / "cand"
    )
    # Rejected at the oracle; the fix it would have written is never asked for.
    assert (result.admitted, result.reward, result.outcome, result.revisions) == (
        False,
        -1.0,
        "failed",
        0,
    )
    assert result.verdict is not None and result.verdict.stage == "oracle" and result.turns == 1
    with RolloutStore(tmp_path / "rollouts.db") as store:
        attempt = store.get_attempt(result.attempt_id)
    assert (attempt.role, attempt.reward, attempt.metadata["arm"]) == (
        "proposer",
        -1.0,
        "prompt_only",
    )
    assert attempt.metadata["stage"] == "oracle"


async def test_a_reply_that_is_not_a_task_is_rejected_with_the_reason(tmp_path, brief):
    model = register("proposer-chatty", ["Here is a great idea for a task: count words."])
    result = await propose(
        brief,
        _settings(tmp_path, model, arm="error_feedback", max_revisions=1),
        out_dir=tmp_path / "cand",
    )
    assert (result.reward, result.outcome, result.revisions) == (-1.0, "failed", 1)
    assert result.verdict is not None and "no <file path" in result.verdict.reason


async def test_a_proposer_that_never_submits_ends_at_its_budget_with_minus_one(
    engine_ready, tmp_path, brief
):
    busy = register("proposer-busy", lambda _m: reply("", tool_call("run", command="echo working")))
    result = await propose(
        brief, _settings(tmp_path, busy, budget=LoopBudget(max_turns=3)), out_dir=tmp_path / "cand"
    )
    assert (result.reward, result.outcome, result.stop_reason) == (-1.0, "failed", "max_turns")
    assert result.tool_calls == 3 and result.gates == []
    # A model that only talks is reminded to submit, and still ends at its budget.
    talker = register("proposer-talker", lambda _m: "I have a plan but I will not act on it.")
    result = await propose(
        brief,
        _settings(tmp_path, talker, budget=LoopBudget(max_turns=3)),
        out_dir=tmp_path / "cand",
        index=1,
    )
    assert (result.reward, result.stop_reason, result.turns) == (-1.0, "max_turns", 3)
    with RolloutStore(tmp_path / "rollouts.db") as store:
        attempt = store.get_attempt(result.attempt_id)
    assert (attempt.reward, attempt.outcome, attempt.metadata["submitted"]) == (
        -1.0,
        "failed",
        False,
    )


async def test_file_blocks_in_a_reply_are_written_and_autosubmitted_at_the_budget(
    engine_ready, tmp_path, brief
):
    """A model that answers in the brief's `<file>` blocks instead of calling `write_file`
    (small models echo the brief): the files reach the folder through the filesystem's checks,
    the model is told so, and what the folder holds goes to the gate when the budget ends."""
    outside = tmp_path / "outside.txt"
    outside.write_text("host file\n")
    # Planted from the workspace (container root): a link to a host file, to be written through.
    plant = tool_call("run", command=f"mkdir -p solution && ln -sfn {outside} solution/solve.sh")
    echo = register("proposer-echo", _phased([[reply("", plant), _blocks(BROKEN)]]))
    settings = _settings(tmp_path, echo, budget=LoopBudget(max_turns=3), max_revisions=0)
    result = await propose(brief, settings, out_dir=tmp_path / "cand")
    cand = Path(result.candidate)
    assert result.autosubmitted and result.submitted, result
    assert result.stop_reason == "max_turns" and len(result.gates) == 1, result
    assert result.verdict is not None and result.reward == -1.0  # the planted bug: rejected
    assert outside.read_text() == "host file\n"
    assert (cand / "instruction.md").read_text() == BROKEN["instruction.md"]
    with RolloutStore(tmp_path / "rollouts.db") as store:
        attempt = store.get_attempt(result.attempt_id)
    assert attempt.metadata["autosubmitted"] is True
    told = (tmp_path / "transcripts" / f"{result.attempt_id}.json").read_text()
    assert "are now in the task folder: instruction.md, task.toml" in told
    assert "solution/solve.sh (PathRefusedError)" in told
    # Autosubmission off: the same model's attempt ends unsubmitted, as before.
    off = settings.model_copy(update={"autosubmit": False})
    result = await propose(brief, off, out_dir=tmp_path / "cand", index=1)
    assert (result.submitted, result.reward, result.gates) == (False, -1.0, [])


async def test_prose_before_any_file_is_set_aside_and_asked_again(engine_ready, tmp_path, brief):
    """A reply that writes nothing (prose, a call the chat format cannot read, a block with no
    path), while the folder is empty, is dropped: the model is asked again with the very prompt
    it had (the embedded 135M model otherwise copies its reply to the budget's end). Once a file
    exists, prose is answered as before."""
    prose = "I'd be happy to finish the files and call the check script."
    bad_call = '<tool_call>\n{"name": "run", "arguments": {"command": "ls"}}}\n</tool_call>'
    no_path = "The task is well-defined.\n<file>\n`/workspace/task`\n</file>"
    served: list[list[BaseMessage]] = []
    script = [
        prose,
        bad_call,
        no_path,
        _blocks(FILES),
        prose,
        reply("", tool_call("submit", summary="s")),
    ]

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        served.append(list(messages))
        return script[len(served) - 1] if len(served) <= len(script) else "done"

    model = register("proposer-prose-first", respond)
    settings = _settings(tmp_path, model, max_revisions=0)
    result = await propose(brief, settings, out_dir=tmp_path / "cand")
    assert result.submitted and not result.autosubmitted, result
    assert (result.set_aside, result.turns) == (3, 6), result
    # Calls 2 to 4 were served exactly call 1's prompt: nothing of the set-aside replies.
    assert [len(m) for m in served[:4]] == [2, 2, 2, 2]
    assert all([m.content for m in call] == [m.content for m in served[0]] for call in served[:4])
    # After the files: the prose kept and answered with the reminder to go on.
    assert served[5][-2].content == prose and "You have not submitted" in served[5][-1].content
    with RolloutStore(tmp_path / "rollouts.db") as store:
        metadata = store.get_attempt(result.attempt_id).metadata
    assert metadata["set_aside"] == 3
    # Each is kept with the prompt it answered (message 2: right after the brief) ...
    recorded = [(r["at"], r["message"]["content"]) for r in metadata["set_aside_replies"]]
    assert recorded == [(2, prose), (2, bad_call), (2, no_path)]
    # ... and is in the proposer's training episode: a sample of the attempt's group at -1
    # (training/proposer/update.py). The submitted task's reference solution is BROKEN (-1 too),
    # so this group is flat and dropped, naming all four samples.
    assert result.reward == -1.0
    plan = plan_proposer_update(tmp_path / "rollouts.db")
    asides = [f"{result.attempt_id}#set-aside-{n}" for n in (1, 2, 3)]
    assert plan.set_aside_samples == 3 and plan.groups == []
    [dropped] = plan.dropped
    assert (dropped.attempts, dropped.rewards) == ([result.attempt_id, *asides], [-1.0] * 4)


async def test_a_call_the_chat_format_cannot_read_is_explained(engine_ready, tmp_path, brief):
    """What the served proposer reads after a `<tool_call>` that is not valid JSON (as the
    embedded 135M model writes one: quotes in a file's content left unescaped; the server then
    returns the reply as text): why no tool ran and the block form that needs no escaping, not
    the bare reminder to go on."""
    bad = (
        '<tool_call>\n{"name": "write_file", "arguments": {"path": "task.toml", '
        '"content": "version = "1.0""}}\n</tool_call>'
    )
    # One file first: before any, a reply that writes nothing is set aside, not answered.
    first = _blocks({"instruction.md": FILES["instruction.md"]})
    model = register(
        "proposer-bad-call",
        lambda messages: first if sum(isinstance(m, AIMessage) for m in messages) == 0 else bad,
    )
    settings = _settings(
        tmp_path, model, budget=LoopBudget(max_turns=3), max_revisions=0, autosubmit=False
    )
    result = await propose(brief, settings, out_dir=tmp_path / "cand")
    assert (result.submitted, result.stop_reason) == (False, "max_turns"), result
    transcript = json.loads((tmp_path / "transcripts" / f"{result.attempt_id}.json").read_text())
    answer = [m for m in transcript["messages"] if m["role"] == "user"][-1]["content"]
    assert answer.startswith("No tool ran: a <tool_call> block is not valid JSON (Expecting"), (
        answer
    )
    assert '<file path="RELATIVE/PATH">CONTENT</file>' in answer and "You have not" not in answer
    # The block form it is pointed to is the one the served system prompt describes (issue 39:
    # one channel, described the same way wherever the proposer is served or trained).
    system = transcript["messages"][0]
    assert system["role"] == "system" and "as `write_file` writes it" in system["content"], system


@pytest.mark.parametrize("arm", ["terminal", "prompt_only"])
async def test_a_failing_model_is_an_error_outcome_not_a_crash(tmp_path, brief, arm):
    def broken(_messages):
        raise ConnectionError("endpoint down")

    model = register(f"proposer-broken-{arm}", broken)
    result = await propose(
        brief,
        _settings(tmp_path, model, arm=arm, budget=LoopBudget(max_turns=3, max_retries=1)),
        out_dir=tmp_path / "cand",
    )
    assert result.outcome == "error" and result.reward is None and "endpoint down" in result.error
    with RolloutStore(tmp_path / "rollouts.db") as store:
        assert store.get_attempt(result.attempt_id).outcome == "error"


async def test_without_solver_feedback_the_brief_has_no_evidence(tmp_path):
    with RolloutStore(tmp_path / "rollouts.db") as store:
        store.start_attempt(id="s1", task_id="logrotate-script", category="shell-scripting")
        store.add_step(
            "s1", 0, tool_name="run", tool_output="gzip: stdin: unexpected end of file", exit_code=1
        )
        store.finish_attempt("s1", reward=0.0, outcome="failed")
        full = build_brief(store, SEED_DIR, n_examples=1)
    seen: dict[str, str] = {}

    def capture(messages):
        seen[str(len(seen))] = str(messages[1].content)
        return _blocks(FILES)

    model = register("proposer-capture", capture)
    for feedback in (True, False):
        await propose(
            full,
            _settings(
                tmp_path,
                model,
                arm="prompt_only",
                solver_feedback=feedback,
                gate=GateConfig(skip=["build", "oracle", "nop", "repeat", "anti_cheat"]),
            ),
            out_dir=tmp_path / "cand",
            index=int(feedback),
        )
    with_evidence, without = seen["0"], seen["1"]
    assert "unexpected end of file" in with_evidence and "What the solver does" in with_evidence
    assert "unexpected end of file" not in without and "What the solver does" not in without


QUICK_GATE = GateConfig(skip=["build", "oracle", "nop", "repeat", "anti_cheat"])


async def test_studio_graph_fans_out_proposers(tmp_path, monkeypatch):
    import autoenvscaling.graphs.proposer.settings as proposer_module

    # Only the static stages: this checks the graph's wiring, the gate is tested above.
    monkeypatch.setattr(proposer_module, "gate_config", lambda **_kw: QUICK_GATE)
    model = register("proposer-graph", lambda _m: _blocks(FILES))
    ctx = ProposerContext(
        model=model,
        arm="prompt_only",
        pool_dir=str(SEED_DIR),
        out_dir=str(tmp_path / "cand"),
        store_path=str(tmp_path / "r.db"),
    )
    out = await build_proposer_graph().ainvoke({"n": 2}, context=ctx)
    assert [r["arm"] for r in out["results"]] == ["prompt_only", "prompt_only"]
    assert all(r["admitted"] and r["reward"] == 1.0 for r in out["results"])
    assert len({r["candidate"] for r in out["results"]}) == 2
    with RolloutStore(tmp_path / "r.db") as store:
        assert store.summary().by_role == {"proposer": 2}


def test_cli_propose_prints_json_and_records_rollouts(tmp_path, monkeypatch):
    import autoenvscaling.graphs.proposer.settings as proposer_module
    from autoenvscaling.cli.main import app

    monkeypatch.setattr(proposer_module, "gate_config", lambda **_kw: QUICK_GATE)
    model = register("proposer-cli", lambda _m: _blocks(FILES))
    cli = CliRunner().invoke(
        app,
        [
            "propose",
            "--n",
            "2",
            "--model",
            model,
            "--arm",
            "error_feedback",
            "--json",
            "--no-solver-feedback",
            "--pool",
            str(SEED_DIR),
            "--store",
            str(tmp_path / "r.db"),
            "--out",
            str(tmp_path / "cand"),
        ],
    )
    assert cli.exit_code == 0, cli.output
    rows = json.loads(cli.stdout)
    assert [(r["arm"], r["reward"], r["solver_feedback"]) for r in rows] == [
        ("error_feedback", 1.0, False)
    ] * 2
    with RolloutStore(tmp_path / "r.db") as store:
        assert store.summary().by_role == {"proposer": 2}
