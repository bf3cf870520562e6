"""SFT data from verified trajectories: seed replays in real sandboxes, rendered as served.

The replay test runs `autoenvscaling sft-data` on 3 seed tasks (each solve.sh command a real
terminal `run` call in a real Harbor trial, kept only at verifier reward 1.0). The rendering test
serves a solver attempt over a real OpenAI-compatible HTTP endpoint (scripted replies, everything
else real) and checks that the example rebuilt from the rollout store is exactly what the server
received: same system prompt, tool schemas, messages, and the same tokens under the chat template.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from typer.testing import CliRunner

from autoenvscaling.cli.main import app
from autoenvscaling.training.sft.data import (
    INLINED_DIR,
    NotReplayableError,
    read_jsonl,
    replay_plan,
    split_script,
)
from tests.conftest import SEED_DIR, seed_tasks

# Small, fast, and between them: a heredoc, a patch file under /solution, find/chmod steps.
REPLAYED = ["sqlite-monthly-revenue", "c-numstat-fix", "fix-site-permissions"]


def test_every_seed_solution_splits_into_commands() -> None:
    for task in seed_tasks():
        plan = replay_plan(task)
        assert plan.steps, task.name
        for step in plan.steps:
            assert "/solution/" not in step.command.replace(INLINED_DIR, ""), task.name
            assert not step.command.startswith("set -"), task.name


def test_split_keeps_heredocs_blocks_and_continuations_whole() -> None:
    script = (
        "#!/bin/bash\n# plan\nset -euo pipefail\ncd /app\n\n# write it\ncat > f <<'EOF'\n"
        "a\n\nb\nEOF\nif true; then\n  echo x\nfi\nsed -e 's/a/b/' \\\n   -e 's/c/d/' f\n"
    )
    steps = split_script(script)
    assert [s.command.splitlines()[0] for s in steps] == [
        "set -euo pipefail",
        "cd /app",
        "cat > f <<'EOF'",
        "if true; then",
        "sed -e 's/a/b/' \\",
    ]
    assert steps[0].comment == "plan" and steps[2].comment == "write it"
    with pytest.raises(NotReplayableError):
        split_script("cat <<EOF\nunterminated\n")


def test_solution_files_are_written_by_the_solver() -> None:
    plan = replay_plan(SEED_DIR / "c-numstat-fix")
    first = plan.steps[0]
    patch = (SEED_DIR / "c-numstat-fix" / "solution" / "fix.patch").read_text()
    assert first.command.startswith(f"mkdir -p {INLINED_DIR.rstrip('/')} && cat > ")
    assert patch.strip().splitlines()[0] in first.command
    assert any(f"patch -p1 < {INLINED_DIR}fix.patch" in s.command for s in plan.steps)
    assert any("set -euo pipefail" in n for n in plan.notes)
    assert not first.comment.lower().startswith("reference solution")


@pytest.fixture(scope="module")
def replayed(engine_ready, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`autoenvscaling sft-data` over 3 seed tasks (real trials); its output folder."""
    out = tmp_path_factory.mktemp("replay") / "sft"
    args = ["sft-data", str(out), "--seed", str(SEED_DIR), "--json"]
    for name in REPLAYED:
        args += ["--task", name]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.timeout(420)
def test_sft_data_replays_seed_tasks(replayed: Path) -> None:
    out = replayed
    report = json.loads((out / "report.json").read_text())
    assert [(r["task_id"], r["reward"], r["kept"]) for r in report["replays"]] == [
        (name, 1.0, True) for name in sorted(REPLAYED)
    ], report["replays"]

    examples = read_jsonl(out / "sft.jsonl")
    assert sorted(e.task_id for e in examples) == sorted(REPLAYED)
    for example in examples:
        plan = replay_plan(SEED_DIR / example.task_id)
        assert example.role == "solver" and example.reward == 1.0
        calls = [m for m in example.messages if m.get("tool_calls")]
        # Every solve.sh command was one real `run` call, its output the terminal's own.
        assert [c["tool_calls"][0]["function"]["arguments"]["command"] for c in calls] == [
            s.command for s in plan.steps
        ]
        # The tool-result text of the one solver interface: output, then how the command ended.
        results = [m["content"] for m in example.messages if m["role"] == "tool"]
        assert len(results) == len(plan.steps)
        assert all(r.endswith("[exit code 0]") for r in results), results
        assert example.messages[-1] == {"role": "assistant", "content": plan.summary}
        assert sorted(t["function"]["name"] for t in example.tools) == [
            "interrupt",
            "read_output",
            "run",
        ]
    sqlite = next(e for e in examples if e.task_id == "sqlite-monthly-revenue")
    last_output = [m for m in sqlite.messages if m["role"] == "tool"][-1]["content"]
    assert last_output.startswith("month,category,orders,units,revenue\n2023-01,")

    # The HF dataset is the JSONL, exactly (nested arguments and schemas round-trip).
    import datasets

    dataset = datasets.load_from_disk(str(out / "dataset"))
    assert len(dataset) == len(examples)
    by_task = {row["task_id"]: row for row in dataset}
    for example in examples:
        row = by_task[example.task_id]
        assert row["messages"] == example.messages and row["tools"] == example.tools


@pytest.mark.timeout(120)
def test_run_folders_are_harvested_and_deduplicated(replayed: Path, tmp_path: Path) -> None:
    """A run folder's solved solver attempts (rebuilt from its store, tasks from its pool) and
    admitted proposer attempts (from transcripts); the same conversations twice count once."""
    import shutil
    import sqlite3

    from autoenvscaling.tools.rollouts.models import Attempt
    from autoenvscaling.tools.rollouts.store import RolloutStore
    from autoenvscaling.tools.rollouts.transcripts import Transcript, save_transcript

    run = tmp_path / "run"
    shutil.copytree(replayed / "trials", run / "trials")
    # SQLite's own copy of a live store: this process may still hold it open (the kept store,
    # tools/rollouts/kept.py), its last commits in the WAL beside the file, not in it.
    source, copy = sqlite3.connect(replayed / "rollouts.db"), sqlite3.connect(run / "rollouts.db")
    source.backup(copy)
    copy.close(), source.close()
    for name in REPLAYED:
        shutil.copytree(SEED_DIR / name, run / "pool" / name)
    conversation = [
        {"role": "system", "content": "You write Harbor tasks."},
        {"role": "user", "content": "Round 1 brief."},
        {"role": "assistant", "content": "", "tool_calls": [_call("submit", {})]},
        {"role": "tool", "tool_call_id": "c", "content": "admitted"},
    ]
    with RolloutStore(run / "rollouts.db") as store:
        for attempt_id, reward in (("p-admitted", 1.0), ("p-rejected", -1.0)):
            store.record_attempt(
                Attempt(id=attempt_id, role="proposer", task_id=attempt_id, reward=reward)
            )
            save_transcript(
                run / "rollouts.db",
                Transcript(attempt_id=attempt_id, messages=conversation, tools=[]),
            )
    out = tmp_path / "harvest"
    args = ["sft-data", str(out), "--run", str(run), "--run", str(run)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    # 3 solved + 1 admitted per copy of the run; the second copy is all duplicates.
    assert report["runs"][str(run)]["examples"] == 4
    assert (report["examples"], report["duplicates_dropped"]) == (4, 4), report
    examples = read_jsonl(out / "sft.jsonl")
    proposer = [e for e in examples if e.role == "proposer"]
    assert [e.attempt_id for e in proposer] == ["p-admitted"]
    assert proposer[0].messages == conversation[:3]  # ends on its own last reply
    # A run's solved attempt renders exactly like the replay that recorded it.
    replays = {e.attempt_id: e for e in read_jsonl(replayed / "sft.jsonl")}
    for example in (e for e in examples if e.role == "solver"):
        assert example.messages == replays[example.attempt_id].messages
        assert example.tools == replays[example.attempt_id].tools


def _call(name: str, arguments: dict) -> dict:
    return {"id": "c", "type": "function", "function": {"name": name, "arguments": arguments}}


# -- the rendering is the served one ---------------------------------------------------------------


class ScriptedOpenAI:
    """An OpenAI-compatible /v1/chat/completions that replays scripted replies and records every
    request body (what a served policy receives)."""

    def __init__(self, replies: list[dict]) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.app = FastAPI()

        @self.app.post("/v1/chat/completions")
        async def chat(request: Request) -> dict:
            body = await request.json()
            self.requests.append(body)
            turn = len(self.requests) - 1
            message = self.replies[min(turn, len(self.replies) - 1)]
            return {
                "id": f"chatcmpl-{turn}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                        "message": {"role": "assistant", **message},
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }


def _served_replies(task: Path) -> list[dict]:
    plan = replay_plan(task)
    replies = [
        {
            "content": step.comment or None,
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "run", "arguments": json.dumps({"command": step.command})},
                }
            ],
        }
        for i, step in enumerate(plan.steps)
    ]
    return [*replies, {"content": plan.summary}]


def _templated(messages: list[dict]) -> list[dict]:
    """What an OpenAI-compatible server hands its chat template: arguments parsed, no nulls."""
    out = []
    for m in messages:
        entry = {k: v for k, v in m.items() if v is not None}
        entry["content"] = m.get("content") or ""
        if m.get("tool_calls"):
            entry["tool_calls"] = [
                {
                    "type": "function",
                    "function": {
                        "name": c["function"]["name"],
                        "arguments": json.loads(c["function"]["arguments"])
                        if isinstance(c["function"]["arguments"], str)
                        else c["function"]["arguments"],
                    },
                }
                for c in m["tool_calls"]
            ]
        entry.pop("tool_call_id", None)
        entry.pop("name", None)
        out.append(entry)
    return out


@pytest.mark.timeout(240)
async def test_example_renders_exactly_like_a_served_attempt(engine_ready, tmp_path: Path) -> None:
    from autoenvscaling.graphs.agent.loop import LoopBudget
    from autoenvscaling.graphs.cold_start.solver_replay import served_solver_interface
    from autoenvscaling.graphs.models import ModelConfig
    from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
    from autoenvscaling.tools.rollouts.store import RolloutStore
    from autoenvscaling.tools.tasks.format import load_task
    from autoenvscaling.training.sft.data import solver_example
    from tests.test_training_vllm_contract import Served
    from tests.tiny_model import build_tokenizer

    task = SEED_DIR / "sqlite-monthly-revenue"
    stub = ScriptedOpenAI(_served_replies(task))
    store = tmp_path / "rollouts.db"
    with Served(stub) as server:
        settings = SolverSettings(
            model=ModelConfig(model="openai:policy", base_url=server.base_url),
            budget=LoopBudget(max_turns=10),
            store_path=str(store),
            run_id="served",
        )
        attempt = await solve_task(task, settings, trials_dir=tmp_path / "trials")
    assert attempt.reward == 1.0, attempt

    interface = await served_solver_interface()
    with RolloutStore(store) as db:
        example = solver_example(
            db,
            attempt.rollout_id,
            first=interface.first_messages(load_task(task).instruction),
            tools=interface.tools,
            source="run",
        )
    assert example is not None
    last = stub.requests[-1]
    served = [*last["messages"], {"role": "assistant", "content": stub.replies[-1]["content"]}]
    # Same tools, same system prompt, same conversation as the server received it.
    assert last["tools"] == example.tools
    assert served[0] == {"role": "system", "content": interface.system_prompt}
    assert _templated(served) == _templated(example.messages)
    # And the same tokens under the policy's chat template (TRL's tool-calling ChatML).
    tokenizer = build_tokenizer()
    ids = [
        tokenizer.apply_chat_template(_templated(m), tools=last["tools"], tokenize=True)[
            "input_ids"
        ]
        for m in (served, example.messages)
    ]
    assert ids[0] == ids[1] and len(ids[0]) > 100
