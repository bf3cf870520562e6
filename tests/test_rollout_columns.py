"""Rollout columns are declared once (the pydantic models) and the on-disk store stays the same:
a store written the way the code before this change wrote it reads back identically, the rows
written now are the rows written then, and every model matches its table in the v1 schema."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import UTC, datetime

import pytest

from autoenvscaling.tools.rollouts.models import ATTEMPTS, STEPS, Attempt, Step
from autoenvscaling.tools.rollouts.schema import MIGRATIONS
from autoenvscaling.tools.rollouts.store import RolloutStore

pytestmark = pytest.mark.timeout(120)

# Copied from the code before columns were derived (the store format of schema v1).
V1_ATTEMPT_COLUMNS = (
    "id, run_id, round, role, task_id, category, policy_version, reward, outcome, turns, "
    "prompt_tokens, completion_tokens, cost, duration_sec, error, started_at, finished_at, metadata"
)
V1_STEP_COLUMNS = (
    "attempt_id, idx, message, tool_name, tool_args, tool_output, output_bytes, exit_code, "
    "duration_sec"
)
V1_SHA256 = "211f7cbc024f1324099d9ddd77d6b57e780f29f8b5790141324932744ef7f42c"

STARTED = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
ATTEMPT = Attempt(
    id="a1",
    run_id="r",
    round=3,
    role="proposer",
    task_id="t",
    category="c",
    policy_version="v2",
    reward=0.5,
    outcome="failed",
    turns=2,
    prompt_tokens=10,
    completion_tokens=20,
    cost=0.25,
    duration_sec=1.5,
    error="boom",
    started_at=STARTED,
    finished_at=STARTED,
    metadata={"purpose": "x", "n": [1, 2]},
)
STEP = Step(
    attempt_id="a1",
    index=0,
    message="hi",
    tool_name="bash",
    tool_args={"cmd": "ls"},
    tool_output="out",
    output_bytes=3,
    exit_code=1,
    duration_sec=0.5,
)
BARE_STEP = Step(attempt_id="a1", index=1)


def _v1_attempt_row(a: Attempt) -> tuple:
    """The row the v1 writer built by hand."""
    return (
        a.id, a.run_id, a.round, a.role, a.task_id, a.category, a.policy_version, a.reward,
        a.outcome, a.turns, a.prompt_tokens, a.completion_tokens, a.cost, a.duration_sec,
        a.error, a.started_at.isoformat(), a.finished_at.isoformat() if a.finished_at else None,
        json.dumps(a.metadata, default=str),
    )  # fmt: skip


def _v1_step_row(s: Step) -> tuple:
    return (
        s.attempt_id, s.index, s.message, s.tool_name,
        None if s.tool_args is None else json.dumps(s.tool_args, default=str),
        s.tool_output, s.output_bytes or 0, s.exit_code, s.duration_sec,
    )  # fmt: skip


def test_column_lists_are_the_v1_text_and_the_shipped_migration_is_unchanged() -> None:
    assert ATTEMPTS.column_list == V1_ATTEMPT_COLUMNS
    assert STEPS.column_list == V1_STEP_COLUMNS
    assert hashlib.sha256(MIGRATIONS[0].encode()).hexdigest() == V1_SHA256


def test_every_model_matches_its_table(tmp_path) -> None:
    RolloutStore(tmp_path / "r.db").close()
    conn = sqlite3.connect(tmp_path / "r.db")
    sql_type = {int: "INTEGER", float: "REAL"}
    for table in (ATTEMPTS, STEPS):
        info = conn.execute(f"PRAGMA table_info({table.name})").fetchall()
        columns = [(name, kind) for _, name, kind, *_ in info if name != "seq"]
        assert [c for c, _ in columns] == list(table.columns)
        for (column, kind), name in zip(columns, table.fields, strict=True):
            annotation = table.model.model_fields[name].annotation
            base = next((t for t in (int, float) if annotation in (t, t | None)), None)
            assert kind == sql_type.get(base, "TEXT"), (table.name, column, annotation)


def test_a_store_written_by_the_v1_writer_reads_back_identically(tmp_path) -> None:
    path = tmp_path / "old.db"
    RolloutStore(path).close()  # the schema (unchanged migration)
    conn = sqlite3.connect(path)
    conn.execute(
        f"INSERT INTO attempts ({V1_ATTEMPT_COLUMNS}) VALUES ({', '.join('?' * 18)})",
        _v1_attempt_row(ATTEMPT),
    )
    conn.executemany(
        f"INSERT INTO steps ({V1_STEP_COLUMNS}) VALUES ({', '.join('?' * 9)})",
        [_v1_step_row(STEP), _v1_step_row(BARE_STEP)],
    )
    conn.commit()
    conn.close()
    with RolloutStore(path, read_only=True) as store:
        trajectory = store.trajectory("a1")
        assert trajectory.attempt == ATTEMPT
        assert trajectory.steps == [STEP, BARE_STEP.model_copy(update={"output_bytes": 0})]
        assert [t.attempt for t in store.iter_trajectories()] == [ATTEMPT]


def test_rows_written_now_are_the_v1_rows(tmp_path) -> None:
    with RolloutStore(tmp_path / "new.db") as store:
        store.record_attempt(ATTEMPT, [STEP, BARE_STEP])
    conn = sqlite3.connect(tmp_path / "new.db")
    assert conn.execute(f"SELECT {V1_ATTEMPT_COLUMNS} FROM attempts").fetchall() == [
        _v1_attempt_row(ATTEMPT)
    ]
    assert conn.execute(f"SELECT {V1_STEP_COLUMNS} FROM steps ORDER BY idx").fetchall() == [
        _v1_step_row(STEP),
        _v1_step_row(BARE_STEP),
    ]


def test_dataset_features_are_derived_as_before(tmp_path) -> None:
    import datasets

    v = datasets.Value
    v1_steps = {
        "index": v("int64"), "message": v("string"), "tool_name": v("string"),
        "tool_args": v("string"), "tool_output": v("string"), "output_bytes": v("int64"),
        "exit_code": v("int64"), "duration_sec": v("float64"),
    }  # fmt: skip
    v1 = datasets.Features(
        {
            "id": v("string"), "run_id": v("string"), "round": v("int64"), "role": v("string"),
            "task_id": v("string"), "category": v("string"), "policy_version": v("string"),
            "reward": v("float64"), "outcome": v("string"), "turns": v("int64"),
            "prompt_tokens": v("int64"), "completion_tokens": v("int64"), "cost": v("float64"),
            "duration_sec": v("float64"), "error": v("string"), "started_at": v("string"),
            "finished_at": v("string"), "metadata": v("string"), "steps": datasets.List(v1_steps),
        }
    )  # fmt: skip
    with RolloutStore(tmp_path / "r.db") as store:
        store.record_attempt(ATTEMPT, [STEP, BARE_STEP])
        dataset = store.to_hf_dataset()
    assert dataset.features == v1
    row = dataset[0]
    assert json.loads(row["metadata"]) == ATTEMPT.metadata
    assert row["started_at"] == STARTED.isoformat().replace("+00:00", "Z")
    assert [json.loads(s["tool_args"]) if s["tool_args"] else None for s in row["steps"]] == [
        {"cmd": "ls"},
        None,
    ]
