"""`export rollouts`: a real rollout store out as Harbor ATIF trajectories (checked by Harbor's own
model), chat JSONL (loaded by `datasets`, rendered by a chat template) and an HF dataset;
filters by role, round, outcome and tag."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoenvscaling.tools.export import RolloutFilter, export_rollouts
from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.run_dir import RunDir

INSTRUCTION = "Write the sum of /app/numbers.txt to /app/sum.txt.\n"


def _run_dir(tmp_path: Path) -> RunDir:
    run = RunDir(tmp_path / "run")
    run.create({"policy_model": "scripted:test"})
    (run.pool / "sum").mkdir(parents=True)
    (run.pool / "sum" / "instruction.md").write_text(INSTRUCTION)
    rows = [
        ("a1", "solver", 1, "solved", 1.0, {"purpose": "refresh"}),
        ("a2", "solver", 1, "failed", 0.0, {"purpose": "calibrate"}),
        ("a3", "solver", 2, "solved", 1.0, {"purpose": "refresh"}),
        ("p1", "proposer", 1, "solved", 1.0, {"arm": "terminal", "model": "scripted:test"}),
    ]
    with RolloutStore(run.rollouts) as store:
        for attempt_id, role, round_, outcome, reward, meta in rows:
            store.record_attempt(
                Attempt(
                    id=attempt_id,
                    run_id="run-x",
                    round=round_,
                    role=role,  # type: ignore[arg-type]
                    task_id="sum",
                    outcome=outcome,  # type: ignore[arg-type]
                    reward=reward,
                    policy_version="v1",
                    metadata=meta,
                ),
                [
                    Step(
                        index=0,
                        message="Let me add them up.",
                        tool_name="run",
                        tool_args={"command": "awk '{s+=$1} END {print s}' /app/numbers.txt"},
                        tool_output="139\n",
                        exit_code=0,
                    ),
                    Step(index=1, message="Done."),
                ],
            )
    return run


def test_filters_select_by_role_round_outcome_and_tag(tmp_path):
    run = _run_dir(tmp_path)
    cases = [
        (RolloutFilter(), 4),
        (RolloutFilter(role="solver"), 3),
        (RolloutFilter(role="solver", round=1), 2),
        (RolloutFilter(outcome="failed"), 1),
        (RolloutFilter(tag="refresh"), 2),
        (RolloutFilter(tag="terminal"), 1),
        (RolloutFilter(role="proposer", outcome="failed"), 0),
    ]
    for i, (where, expected) in enumerate(cases):
        out = tmp_path / f"{i}.jsonl"
        written = export_rollouts(run.rollouts, out, fmt="jsonl", where=where)
        assert written.attempts == expected, where
        assert len(out.read_text().splitlines()) == expected


def test_atif_files_validate_against_harbors_trajectory_model(tmp_path):
    from harbor.models.trajectories.trajectory import Trajectory

    run = _run_dir(tmp_path)
    from autoenvscaling.cli.export import role_tool_schemas

    tools = role_tool_schemas(run.rollouts)
    result = export_rollouts(
        run.rollouts, tmp_path / "atif", fmt="atif", task_dirs=[run.pool], tools=tools
    )
    files = sorted((tmp_path / "atif").glob("*.trajectory.json"))
    assert result.attempts == len(files) == 4
    atif = Trajectory.model_validate_json((tmp_path / "atif" / "a1.trajectory.json").read_text())
    assert [s.source for s in atif.steps] == ["user", "agent", "agent"]
    assert atif.steps[0].message == INSTRUCTION
    call = atif.steps[1].tool_calls[0]  # type: ignore[index]
    assert call.function_name == "run" and "awk" in call.arguments["command"]
    assert atif.steps[1].observation.results[0].content == "139\n"  # type: ignore[union-attr]
    assert atif.extra and atif.extra["reward"] == 1.0
    assert atif.agent.tool_definitions == tools["solver"]


@pytest.mark.timeout(180)
def test_jsonl_loads_with_datasets_and_renders_through_the_chat_template(tmp_path):
    import datasets

    from autoenvscaling.cli.main import app
    from tests.tiny_model import build_tokenizer

    run = _run_dir(tmp_path)
    out = tmp_path / "solver.jsonl"
    cli = CliRunner().invoke(
        app,
        [
            "export",
            "rollouts",
            str(run.root),
            "--format",
            "jsonl",
            "--out",
            str(out),
            "--role",
            "solver",
            "--json",
        ],
    )
    assert cli.exit_code == 0, cli.output
    assert json.loads(cli.stdout)["attempts"] == 3
    rows = datasets.load_dataset("json", data_files=str(out), split="train")
    assert rows.num_rows == 3 and set(rows["role"]) == {"solver"}
    row = rows[0]
    assert [m["role"] for m in row["messages"]] == ["user", "assistant", "tool", "assistant"]
    # The role's tools carry the MCP server's own input schema.
    run_tool = next(t for t in row["tools"] if t["function"]["name"] == "run")
    assert "command" in json.dumps(run_tool["function"]["parameters"])

    tokenizer = build_tokenizer()
    text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
    assert "<tool_call>" in text and "<tool_response>\n139" in text
    assert INSTRUCTION.strip() in text and "awk" in text

    hf = CliRunner().invoke(
        app,
        [
            "export",
            "rollouts",
            str(run.root),
            "--format",
            "hf",
            "--out",
            str(tmp_path / "hf"),
            "--tag",
            "refresh",
        ],
    )
    assert hf.exit_code == 0, hf.output
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    assert sorted(loaded["id"]) == ["a1", "a3"]
    assert json.loads(loaded[0]["messages"])[0]["content"] == INSTRUCTION
