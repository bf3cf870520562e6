"""The rollout store against real SQLite files and a real PostgreSQL server (every test on both
backends): writes, idempotency, queries, search, export."""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

import pytest

from autoenvscaling.tools.rollouts.models import (
    Attempt,
    AttemptNotFoundError,
    RolloutStoreError,
    Step,
    stable_attempt_id,
)
from autoenvscaling.tools.rollouts.schema import SCHEMA_VERSION, SchemaTooNewError
from autoenvscaling.tools.rollouts.store import RolloutStore


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    """A store location nothing has opened yet: a SQLite file, or a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return str(tmp_path / "rollouts.db")
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def store(location):
    with RolloutStore(location) as s:
        yield s


def _counts(store: RolloutStore) -> tuple[int, int]:
    """Rows in the tables, counted by a connection of its own."""
    with RolloutStore(store.location) as other:
        conn = other._conn()
        return (
            conn.execute("SELECT count(*) FROM attempts").fetchone()[0],
            conn.execute("SELECT count(*) FROM steps").fetchone()[0],
        )


def test_database_is_wal_with_current_schema(store):
    if store.postgres:
        assert store.summary().schema_version == SCHEMA_VERSION
        assert store.location.startswith("postgresql://")
        with pytest.raises(RolloutStoreError, match="PostgreSQL store, not a file"):
            _ = store.path
        store.record_attempt(Attempt(id="a", task_id="t", outcome="solved", reward=1.0))
        assert RolloutStore(store.location).get_attempt("a").outcome == "solved"
        return
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    # Re-opening an up-to-date store migrates nothing and keeps the data.
    store.record_attempt(Attempt(id="a", task_id="t", outcome="solved", reward=1.0))
    assert RolloutStore(store.path).get_attempt("a").outcome == "solved"


def test_start_step_finish_and_trajectory(store):
    attempt_id = store.start_attempt(
        task_id="fix-build",
        category="build",
        policy_version="v1",
        run_id="run-1",
        round=2,
        metadata={"seed": 7},
    )
    store.add_step(
        attempt_id,
        0,
        message="let me look",
        tool_name="run",
        tool_args={"command": "ls"},
        tool_output="Makefile\nsrc\n",
        exit_code=0,
        duration_sec=0.01,
    )
    store.add_step(
        attempt_id,
        1,
        message="build it",
        tool_name="run",
        tool_args={"command": "make"},
        tool_output="make: *** [all] Error 2",
        exit_code=2,
    )
    finished = store.finish_attempt(
        attempt_id,
        reward=0.0,
        outcome="failed",
        prompt_tokens=120,
        completion_tokens=30,
        cost=0.002,
        metadata={"note": "x"},
    )
    assert finished.turns == 2  # defaults to the number of steps
    assert finished.duration_sec is not None and finished.duration_sec >= 0

    trajectory = store.trajectory(attempt_id)
    assert trajectory.attempt.metadata == {"seed": 7, "note": "x"}
    assert trajectory.attempt.round == 2 and trajectory.attempt.policy_version == "v1"
    assert [s.index for s in trajectory.steps] == [0, 1]
    assert trajectory.steps[1].tool_args == {"command": "make"}
    assert trajectory.steps[1].exit_code == 2
    assert trajectory.steps[0].output_bytes == len("Makefile\nsrc\n")


def test_tool_output_is_capped_head_and_tail_with_full_size(location):
    store = RolloutStore(location, output_cap=1000)
    attempt_id = store.start_attempt(task_id="t")
    big = "HEAD" + "x" * 50_000 + "TAIL"
    step = store.add_step(attempt_id, 0, tool_output=big)
    stored = store.trajectory(attempt_id).steps[0]
    assert stored == step
    assert stored.output_bytes == len(big)
    assert stored.tool_output.startswith("HEAD") and stored.tool_output.endswith("TAIL")
    assert "bytes truncated" in stored.tool_output and stored.truncated
    assert len(stored.tool_output.encode()) < 1100
    # A caller that already capped the output (e.g. the shell) can pass the true size.
    store.add_step(attempt_id, 1, tool_output="short", output_bytes=10_000)
    assert store.trajectory(attempt_id).steps[1].output_bytes == 10_000


def test_writes_are_idempotent_on_attempt_id(store):
    attempt_id = stable_attempt_id("run-1", 0, "solver", "task-a", 3)
    assert attempt_id == stable_attempt_id("run-1", 0, "solver", "task-a", 3)
    attempt = Attempt(id=attempt_id, task_id="task-a", outcome="failed", reward=0.0)
    steps = [Step(index=i, tool_output=f"out {i}") for i in range(3)]
    store.record_attempt(attempt, steps)
    store.record_attempt(attempt, steps)  # a resumed run records it again
    assert _counts(store) == (1, 3)

    # start_attempt again does not reset a finished attempt; a re-run step replaces the old one.
    store.start_attempt(task_id="task-a", id=attempt_id)
    assert store.get_attempt(attempt_id).outcome == "failed"
    store.add_step(attempt_id, 1, tool_output="replaced")
    store.record_attempt(attempt.model_copy(update={"outcome": "solved", "reward": 1.0}), steps[:1])
    assert _counts(store) == (1, 3)
    trajectory = store.trajectory(attempt_id)
    assert trajectory.attempt.outcome == "solved"
    assert trajectory.steps[1].tool_output == "replaced"
    # The FTS index follows replacements: the old text is gone, the new one is found.
    assert [h.step_index for h in store.search("replaced")] == [1]
    assert store.search("out 1") == []


def test_unknown_attempt_is_a_clear_error(store):
    with pytest.raises(AttemptNotFoundError, match="start_attempt first"):
        store.add_step("nope", 0, tool_output="x")
    with pytest.raises(AttemptNotFoundError):
        store.trajectory("nope")


def test_pass_rates_by_task_and_category_and_version(store):
    def add(task, category, version, outcome, reward):
        store.record_attempt(
            Attempt(
                task_id=task,
                category=category,
                policy_version=version,
                outcome=outcome,
                reward=reward,
            )
        )

    add("t1", "build", "v0", "solved", 1.0)
    add("t1", "build", "v0", "failed", 0.0)
    add("t1", "build", "v0", "error", None)  # infrastructure: excluded from the rate
    add("t2", "build", "v0", "failed", 0.0)
    add("t1", "build", "v1", "solved", 1.0)
    store.start_attempt(task_id="t1", category="build", policy_version="v1")  # still running
    store.record_attempt(
        Attempt(task_id="t1", role="proposer", outcome="solved", reward=1.0, policy_version="v0")
    )

    by_task = {(r.key, r.policy_version): r for r in store.pass_rates(by="task")}
    assert by_task[("t1", "v0")].attempts == 3
    assert by_task[("t1", "v0")].errors == 1
    assert by_task[("t1", "v0")].pass_rate == 0.5
    assert by_task[("t2", "v0")].pass_rate == 0.0
    assert by_task[("t1", "v1")].attempts == 1 and by_task[("t1", "v1")].pass_rate == 1.0

    only_v0 = store.pass_rates(by="category", policy_version="v0")
    assert [(r.key, r.solved, r.attempts) for r in only_v0] == [("build", 1, 4)]
    assert store.pass_rates(role="proposer")[0].solved == 1
    with pytest.raises(ValueError, match="task' or 'category"):
        store.pass_rates(by="nonsense")  # type: ignore[arg-type]


def test_recent_failures_carry_last_error_output(store):
    store.record_attempt(
        Attempt(id="old", task_id="t1", outcome="failed", reward=0.0),
        [Step(index=0, tool_output="fine", exit_code=0)],
    )
    store.record_attempt(
        Attempt(id="new", task_id="t2", outcome="timeout", reward=0.0, error="verifier timed out"),
        [
            Step(index=0, tool_output="ImportError: no module named numpy", exit_code=1),
            Step(index=1, tool_output="still fine", exit_code=0),
        ],
    )
    store.record_attempt(Attempt(id="ok", task_id="t3", outcome="solved", reward=1.0))
    failures = store.recent_failures(limit=10)
    assert [f.attempt_id for f in failures] == ["new", "old"]
    assert failures[0].last_error_output == "ImportError: no module named numpy"
    assert failures[0].last_error_step == 0
    assert failures[0].error == "verifier timed out"
    assert failures[1].last_error_output == "fine"  # no failing step: the last output
    assert store.recent_failures(limit=1)[0].attempt_id == "new"
    assert store.recent_failures(role="proposer") == []


def test_search_tool_outputs_and_errors(store):
    store.record_attempt(
        Attempt(id="a", task_id="t1", outcome="error", error="docker daemon unreachable"),
        [Step(index=0, tool_output="pip install requests\nSegmentation fault (core dumped)")],
    )
    store.record_attempt(
        Attempt(id="b", task_id="t2", outcome="solved"),
        [Step(index=0, tool_output="all tests passed")],
    )
    hits = store.search("segmentation fault")
    assert [(h.attempt_id, h.kind, h.step_index) for h in hits] == [("a", "tool_output", 0)]
    assert "[Segmentation]" in hits[0].snippet
    errors = store.search("daemon")
    assert [(h.attempt_id, h.kind) for h in errors] == [("a", "error")]
    # FTS syntax in the user's text is quoted, not parsed (and cannot raise).
    assert store.search('passed" OR "x') == []
    assert store.search("") == []
    assert [h.attempt_id for h in store.search("pass*", raw=True)] == ["b"]
    with pytest.raises(RolloutStoreError, match="bad search query"):
        store.search('"unbalanced', raw=True)


def test_summary_and_list_attempts(store):
    store.record_attempt(
        Attempt(
            task_id="t1",
            run_id="r1",
            policy_version="v0",
            outcome="solved",
            reward=1.0,
            prompt_tokens=10,
            completion_tokens=5,
            cost=0.5,
        ),
        [Step(index=0), Step(index=1)],
    )
    store.record_attempt(
        Attempt(
            task_id="t2",
            run_id="r1",
            role="proposer",
            policy_version="v1",
            outcome="failed",
            reward=0.0,
        )
    )
    store.start_attempt(task_id="t3", run_id="r2")
    summary = store.summary()
    assert (summary.attempts, summary.running, summary.steps) == (3, 1, 2)
    assert summary.by_role == {"solver": 2, "proposer": 1}
    assert summary.by_outcome == {"solved": 1, "failed": 1, "running": 1}
    assert (summary.runs, summary.tasks) == (2, 3)
    assert summary.policy_versions == ["v0", "v1", ""]
    assert summary.mean_reward == 0.5 and summary.cost == 0.5 and summary.prompt_tokens == 10
    assert [a.task_id for a in store.list_attempts(outcome="running")] == ["t3"]
    assert [a.task_id for a in store.list_attempts(run_id="r1")] == ["t2", "t1"]


def test_export_hf_dataset(store):
    store.record_attempt(
        Attempt(id="a", task_id="t1", outcome="solved", reward=1.0, metadata={"k": [1, 2]}),
        [
            Step(
                index=0,
                message="m",
                tool_name="run",
                tool_args={"command": "ls"},
                tool_output="out",
                exit_code=0,
            )
        ],
    )
    store.record_attempt(Attempt(id="b", task_id="t2", role="proposer", outcome="failed"))
    dataset = store.to_hf_dataset()
    assert dataset.num_rows == 2
    assert dataset[0]["steps"][0]["tool_output"] == "out"
    assert json.loads(dataset[0]["steps"][0]["tool_args"]) == {"command": "ls"}
    assert dataset[1]["steps"] == []
    assert store.to_hf_dataset(role="proposer")["id"] == ["b"]


def test_threads_share_a_store_object(store):
    def work(n: int) -> None:
        for i in range(25):
            store.record_attempt(Attempt(id=f"{n}-{i}", task_id="t"), [Step(index=0)])

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _counts(store) == (100, 100)


def test_schema_newer_than_code_is_refused(location):
    with RolloutStore(location) as store:
        if store.postgres:
            store._conn().execute("UPDATE rollout_schema SET version = ?", (SCHEMA_VERSION + 1,))
        else:
            conn = sqlite3.connect(location)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
            conn.close()
    with pytest.raises(SchemaTooNewError, match="upgrade autoenvscaling"):
        RolloutStore(location)


def _holds_a_store(location: str) -> bool:
    if not location.startswith("postgresql://"):
        return Path(location).exists()
    import psycopg

    with psycopg.connect(location) as conn:
        row = conn.execute("SELECT to_regclass('attempts')").fetchone()
        return row is not None and row[0] is not None


def test_read_only_store(location):
    with pytest.raises(RolloutStoreError, match="no rollout store"):
        RolloutStore(location, read_only=True)
    assert not _holds_a_store(location)  # a read-only open creates nothing
    writer = RolloutStore(location)
    writer.record_attempt(Attempt(id="a", task_id="t", outcome="solved"))
    reader = RolloutStore(location, read_only=True)
    assert reader.summary().attempts == 1
    with pytest.raises(RolloutStoreError, match="read-only"):
        reader.start_attempt(task_id="t")


def test_error_set_on_finish_is_searchable(store):
    attempt_id = store.start_attempt(task_id="t")
    assert store.search("oomkilled") == []
    store.finish_attempt(attempt_id, reward=None, outcome="error", error="sandbox OOMKilled at 2GB")
    assert [(h.attempt_id, h.kind) for h in store.search("oomkilled")] == [(attempt_id, "error")]
    store.finish_attempt(attempt_id, reward=None, outcome="error", error="replaced text")
    assert store.search("oomkilled") == []


def test_deleted_attempts_leave_no_steps_or_search_hits(store):
    store.record_attempt(
        Attempt(id="gone", task_id="t", outcome="failed", error="stale calibration"),
        [Step(index=0, tool_output="segfault in the stale rollout")],
    )
    store.record_attempt(
        Attempt(id="kept", task_id="t", outcome="solved"), [Step(index=0, tool_output="ok")]
    )
    assert store.delete_attempts(["gone", "never-there"]) == 1
    assert _counts(store) == (1, 1)
    assert store.search("segfault") == [] and store.search("stale") == []
    with pytest.raises(AttemptNotFoundError):
        store.get_attempt("gone")
    assert store.get_attempt("kept").outcome == "solved"


def test_raw_search_syntax_on_both_backends(store):
    """FTS5's query syntax means the same on PostgreSQL (pg_search.py translates it)."""
    store.record_attempt(
        Attempt(id="a", task_id="t"),
        [Step(index=0, tool_output="gcc: undefined reference to `main'")],
    )
    store.record_attempt(
        Attempt(id="b", task_id="t"), [Step(index=0, tool_output="permission denied: /etc/x")]
    )
    store.record_attempt(Attempt(id="c", task_id="t"), [Step(index=0, tool_output="reference ok")])

    def ids(query: str) -> list[str]:
        return sorted(h.attempt_id for h in store.search(query, raw=True))

    assert ids('"undefined reference"') == ["a"]  # a phrase: adjacent, in order
    assert ids('"reference undefined"') == []
    assert ids("undefined OR denied") == ["a", "b"]
    assert ids("reference NOT undefined") == ["c"]
    assert ids("(permission OR gcc) AND denied") == ["b"]
    assert ids("perm* OR undef*") == ["a", "b"]
    assert ids("reference") == ["a", "c"]
    with pytest.raises(RolloutStoreError, match="bad search query"):
        store.search("(unbalanced", raw=True)


def test_nul_bytes_in_output_are_stored(store):
    """A sandbox may print NUL: SQLite keeps it, PostgreSQL text cannot (replaced by U+FFFD)."""
    store.record_attempt(
        Attempt(id="a", task_id="t"), [Step(index=0, tool_output="bin\x00ary tail")]
    )
    out = store.trajectory("a").steps[0].tool_output
    assert out == ("bin\ufffdary tail" if store.postgres else "bin\x00ary tail")
    assert [h.attempt_id for h in store.search("tail")] == ["a"]


def test_transcripts_live_with_the_store(store):
    from autoenvscaling.tools.rollouts.transcripts import (
        Transcript,
        load_transcript,
        save_transcript,
    )

    transcript = Transcript(attempt_id="a1", messages=[{"role": "user", "content": "hi"}])
    where = save_transcript(store.location, transcript)
    assert (where is None) == store.postgres  # a row of the database, or a file next to it
    assert load_transcript(store.location, "a1") == transcript
    assert load_transcript(store.location, "missing") is None


def test_readers_given_the_location_see_the_store(store):
    """The flywheel hands readers the store's location (a path or a URL), not an open store."""
    from autoenvscaling.tools.agents.brief import build_brief

    from .conftest import SEED_DIR

    store.record_attempt(
        Attempt(task_id="git-bisect-regression", category="git", outcome="failed", reward=0.0),
        [Step(index=0, tool_output="fatal: bad revision", exit_code=128)],
    )
    by_location = build_brief(store.location, SEED_DIR, n_examples=1)
    assert [r.task_id for r in by_location.task_rates] == ["git-bisect-regression"]
    assert by_location == build_brief(store, SEED_DIR, n_examples=1)
