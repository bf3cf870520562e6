"""The proposer's inputs and outputs: the brief from a real store and pool, the file-block format,
and the gate's MCP face (check / submit) over a real MCP session."""

from __future__ import annotations

import json
import shutil

import pytest

from autoenvscaling.graphs.agent.mcp_tools import open_mcp_tools
from autoenvscaling.graphs.proposer.settings import ProposerSettings
from autoenvscaling.graphs.proposer.workspace import proposer_tools
from autoenvscaling.mcp_servers.gate import build_gate_server
from autoenvscaling.tools.agents.brief import build_brief
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.file_blocks import (
    ReplyFormatError,
    parse_file_blocks,
    render_file_blocks,
)
from autoenvscaling.tools.tasks.format import load_task, write_task

from .conftest import FIXTURES, SEED_DIR, seed_tasks


def _attempt(
    store: RolloutStore, task: str, category: str, outcome: str, version: str, output: str = "ok"
) -> None:
    attempt_id = store.start_attempt(task_id=task, category=category, policy_version=version)
    store.add_step(
        attempt_id,
        0,
        tool_name="run",
        tool_output=output,
        exit_code=0 if outcome == "solved" else 1,
    )
    store.finish_attempt(attempt_id, reward=1.0 if outcome == "solved" else 0.0, outcome=outcome)


@pytest.fixture
def store(tmp_path):
    with RolloutStore(tmp_path / "rollouts.db") as opened:
        # git: 1 of 4 solved, over two policy versions; sqlite: 3 of 4; logrotate: never.
        for i, outcome in enumerate(["solved", "failed", "failed", "failed"]):
            _attempt(opened, "git-bisect-regression", "git", outcome, f"v{i % 2}")
        for outcome in ["solved", "solved", "solved", "failed"]:
            _attempt(opened, "sqlite-monthly-revenue", "sqlite", outcome, "v1")
        _attempt(
            opened,
            "logrotate-script",
            "shell-scripting",
            "failed",
            "v1",
            output="gzip: /app/logs/web.log.1.gz: unexpected end of file",
        )
        yield opened


def test_brief_carries_the_solvers_evidence(store):
    brief = build_brief(store, SEED_DIR, n_examples=3)
    rates = {r.task_id: r for r in brief.task_rates}
    assert rates["git-bisect-regression"].pass_rate == 0.25  # pooled over both versions
    assert rates["git-bisect-regression"].attempts == 4
    assert brief.task_rates[0].task_id == "logrotate-script"  # lowest first
    assert brief.in_band == ["git-bisect-regression", "sqlite-monthly-revenue"]
    assert brief.targets == ["shell-scripting", "git", "sqlite"]
    assert "unexpected end of file" in brief.failures[0].error_output
    # Examples start with the weakest category and cover different ones.
    assert [e.category for e in brief.examples] == ["shell-scripting", "git", "sqlite"]
    seeds = len(seed_tasks())
    assert brief.pool_size == seeds and sum(c.tasks for c in brief.categories) == seeds
    evidence = brief.sections()["evidence"]
    assert "git-bisect-regression" in evidence and "unexpected end of file" in evidence
    # A database path works as well as an open store (the flywheel passes its run's path).
    assert build_brief(store.path, SEED_DIR, n_examples=3) == brief
    assert build_brief(store.path.with_name("none.db"), SEED_DIR).task_rates == []
    # One policy version only.
    v0 = build_brief(store, SEED_DIR, policy_version="v0")
    assert [(r.task_id, r.attempts) for r in v0.task_rates] == [("git-bisect-regression", 2)]


def test_brief_without_feedback_has_no_evidence_and_variants_rotate_examples(store):
    brief = build_brief(store, SEED_DIR, n_examples=2)
    bare = brief.without_feedback()
    assert not (bare.task_rates or bare.failures or bare.in_band or bare.targets)
    assert all(c.pass_rate is None for c in bare.categories) and bare.sections()["evidence"] == ""
    assert build_brief(store, SEED_DIR, solver_feedback=False).failures == []
    names = {
        tuple(e.name for e in build_brief(None, SEED_DIR, n_examples=2, variant=v).examples)
        for v in range(4)
    }
    assert len(names) == 4


def test_file_blocks_round_trip_a_seed_task(tmp_path):
    source = SEED_DIR / "access-log-report"
    text = render_file_blocks(source)
    assert "tests/gen_log.py is an identical copy of environment/gen_log.py" in text
    spec = parse_file_blocks(text)
    task = write_task(spec, tmp_path / "copy")
    written = {p.relative_to(task.root).as_posix() for p in task.files()}
    original = {p.relative_to(source).as_posix() for p in load_task(source).files()}
    assert written == original - {"tests/gen_log.py"}  # the named copy is not repeated
    for rel in written:
        assert (task.root / rel).read_bytes() == (source / rel).read_bytes()
    assert (task.root / "solution" / "solve.sh").stat().st_mode & 0o111


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("Sure! Here's a task idea.", "no <file path"),
        (
            '<file path="instruction.md">\nx\n</file>\n<file path="task.toml">\n</file>',
            "tests/test.sh",
        ),
        ('<file path="../escape.sh">\nx\n</file>', "relative to the task folder"),
        ('<file path="notes/idea.md">\nx\n</file>', "environment/, tests/ and solution/"),
        ('<file path="tests/test.sh">\na\n</file><file path="tests/test.sh">\nb\n</file>', "twice"),
    ],
)
def test_file_block_errors_say_what_to_change(reply, message):
    with pytest.raises(ReplyFormatError, match=message.replace("(", r"\(")):
        parse_file_blocks(reply)


async def test_gate_tools_check_and_submit_only_their_own_folder(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(FIXTURES / "gate_tasks" / "invalid_toml", broken)
    summaries: list[str] = []
    servers = {"gate": build_gate_server(broken, on_submit=summaries.append)}
    async with open_mcp_tools(servers) as tools:
        by_name = {tool.name: tool for tool in tools}
        assert set(by_name) == {"check", "submit"}
        assert "folder" not in by_name["check"].args  # the folder is fixed, not the model's choice
        report = json.loads(
            (
                await by_name["check"].ainvoke(
                    {"type": "tool_call", "name": "check", "args": {"until": "lint"}, "id": "1"}
                )
            ).text
        )
        assert (report["passed"], report["stage"]) == (False, "lint")
        assert "task.toml" in report["reason"]
        receipt = json.loads(
            (
                await by_name["submit"].ainvoke(
                    {
                        "type": "tool_call",
                        "name": "submit",
                        "args": {"summary": "a toml task"},
                        "id": "2",
                    }
                )
            ).text
        )
    assert receipt["submitted"] and "task.toml" in receipt["files"]
    assert receipt["format_problems"] and summaries == ["a toml task"]
    # The folder's host path never reaches the model (it names files relative to its folder).
    assert str(tmp_path) not in json.dumps(report) + json.dumps(receipt), (report, receipt)


async def test_quick_check_of_a_good_task_runs_only_the_stages_asked(tmp_path):
    async with open_mcp_tools({"gate": build_gate_server(FIXTURES / "good_task")}) as tools:
        check = next(t for t in tools if t.name == "check")
        report = json.loads(
            (
                await check.ainvoke(
                    {"type": "tool_call", "name": "check", "args": {"until": "lint"}, "id": "1"}
                )
            ).text
        )
    ran = [s["stage"] for s in report["stages"] if not s["skipped"]]
    assert report["passed"] is True and ran == ["lint"]


async def test_terminal_arm_tools_are_all_mcp_and_follow_solver_feedback(tmp_path, store):
    candidate = tmp_path / "cand"
    candidate.mkdir()
    names = {}
    for feedback in (True, False):
        settings = ProposerSettings(store_path=str(store.path), solver_feedback=feedback)
        async with proposer_tools(settings, candidate) as tools:
            names[feedback] = {t.name for t in tools}
    basic = {
        "run",
        "read_output",
        "interrupt",
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "glob",
        "grep",
        "check",
        "submit",
        "screenshot",  # the desktop tools (computer use): ProposerSettings.desktop_tools
        "key",
        "type_text",
        "click",
    }
    assert names[False] == basic
    assert names[True] - basic >= {"pass_rates", "recent_failures", "get_trajectory"}
