"""The rollout store: one row per solver/proposer attempt, one row per step, in SQLite (WAL).

Safe with several writer processes: every write is one IMMEDIATE transaction and waits on the
busy timeout instead of failing; each process and thread gets its own connection. Writes are
idempotent on the caller's attempt id (and step index), so a resumed run that records an attempt
again updates it instead of duplicating it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, Field

from autoenvscaling.tools.rollouts.columns import Table
from autoenvscaling.tools.rollouts.schema import (
    SCHEMA_VERSION,
    SchemaOutdatedError,
    check_version,
    migrate,
)
from autoenvscaling.tools.text_cap import cap_text, tail_text

if TYPE_CHECKING:
    import datasets

Role = Literal["solver", "proposer"]
Outcome = Literal["solved", "failed", "timeout", "error"]
FAILED_OUTCOMES: tuple[Outcome, ...] = ("failed", "timeout", "error")

DEFAULT_OUTPUT_CAP = 16 * 1024
#: Matches ranked per search and table, newest first (see RolloutStore.search).
SEARCH_WINDOW = 5000


class RolloutStoreError(RuntimeError):
    """A rollout store operation could not be carried out."""


class AttemptNotFoundError(RolloutStoreError, KeyError):
    """No attempt has this id."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else "attempt not found"


def _now() -> datetime:
    return datetime.now(UTC)


def new_attempt_id() -> str:
    return uuid.uuid4().hex


def stable_attempt_id(*parts: object) -> str:
    """An attempt id derived from what identifies it (run, round, role, task, sample number...).

    A run that resumes after a crash computes the same id again, so its writes stay idempotent.
    """
    key = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(key.encode()).hexdigest()[:32]


class Attempt(BaseModel):
    """One solver or proposer attempt at one task."""

    id: str = Field(
        default_factory=new_attempt_id, description="Caller-chosen key; see stable_attempt_id."
    )
    run_id: str = ""
    round: int = 0
    role: Role = "solver"
    task_id: str
    category: str = ""
    policy_version: str = ""
    reward: float | None = None
    outcome: Outcome | None = Field(default=None, description="None while the attempt is running.")
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    duration_sec: float | None = None
    error: str | None = None
    started_at: datetime = Field(default_factory=_now)
    finished_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Step(BaseModel):
    """One turn of an attempt: what the model said and the tool call it made."""

    attempt_id: str = ""
    index: int
    message: str | None = Field(default=None, description="The model's text for this turn.")
    tool_name: str | None = None
    tool_args: dict[str, Any] | None = None
    tool_output: str | None = Field(default=None, description="Capped head + tail with a marker.")
    output_bytes: int | None = Field(
        default=None, description="Full size of the tool output in bytes, before any cap."
    )
    exit_code: int | None = None
    duration_sec: float | None = None

    @property
    def truncated(self) -> bool:
        stored = len((self.tool_output or "").encode())
        return self.output_bytes is not None and self.output_bytes > stored


class Trajectory(BaseModel):
    attempt: Attempt
    steps: list[Step]


class PassRate(BaseModel):
    key: str = Field(description="Task id or category.")
    policy_version: str
    attempts: int = Field(description="Finished attempts.")
    solved: int
    errors: int = Field(description="Attempts that ended in an infrastructure error.")
    pass_rate: float | None = Field(
        description="solved / (attempts - errors); None when no scored attempt."
    )
    mean_reward: float | None


class Failure(BaseModel):
    """A failed, timed-out or errored attempt with the last error output it produced."""

    attempt_id: str
    run_id: str
    round: int
    role: Role
    task_id: str
    category: str
    policy_version: str
    outcome: Outcome
    reward: float | None
    turns: int
    started_at: datetime
    error: str | None = Field(description="The attempt's error text (tail).")
    last_error_output: str | None = Field(
        description="Output (tail) of the last step with a non-zero exit code, else of the last step."
    )
    last_error_step: int | None


class SearchHit(BaseModel):
    attempt_id: str
    task_id: str
    role: Role
    outcome: Outcome | None
    kind: Literal["tool_output", "error"]
    step_index: int | None
    snippet: str


class StoreSummary(BaseModel):
    path: str
    schema_version: int
    attempts: int
    running: int
    steps: int
    by_role: dict[str, int]
    by_outcome: dict[str, int]
    runs: int
    tasks: int
    policy_versions: list[str]
    mean_reward: float | None
    prompt_tokens: int
    completion_tokens: int
    cost: float
    first_started_at: datetime | None
    last_started_at: datetime | None


# The models are the declaration; column lists, rows and dataset features derive from them.
ATTEMPTS = Table("attempts", Attempt)
STEPS = Table("steps", Step, renames={"index": "idx"})  # INDEX is an SQL keyword
#: What identifies an attempt never changes; a re-recorded attempt updates every other column.
_IDENTITY = ("id", "run_id", "round", "role", "task_id", "category", "policy_version", "started_at")
_RESULT_FIELDS = tuple(c for c in ATTEMPTS.columns if c not in _IDENTITY)


class RolloutStore:
    """`RolloutStore(path)`; methods may be called from any process or thread."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        busy_timeout_sec: float = 60.0,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self.busy_timeout_sec = busy_timeout_sec
        self.output_cap = output_cap
        self._local = threading.local()
        if read_only:
            if self.path.is_dir():
                raise RolloutStoreError(
                    f"{self.path} is a folder, not a rollout store: pass the SQLite file "
                    "itself (a run's is <run-dir>/rollouts.db)"
                )
            if not self.path.exists():
                raise RolloutStoreError(f"no rollout store at {self.path}")
            try:
                version = check_version(self._conn(), str(self.path))
            except sqlite3.DatabaseError as exc:
                raise RolloutStoreError(
                    f"{self.path} is not a rollout store: SQLite cannot read it ({exc})"
                ) from None
            if version < SCHEMA_VERSION:
                raise SchemaOutdatedError(
                    f"{self.path} has rollout schema v{version} (current v{SCHEMA_VERSION}): "
                    "open it once read-write to migrate"
                )
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            migrate(self._conn(), str(self.path))

    # -- connections -------------------------------------------------------------------------

    def _conn(self) -> sqlite3.Connection:
        """This thread's connection; a forked child opens its own instead of sharing the parent's."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        live = self.read_only and os.path.exists(f"{self.path}-wal")
        if conn is not None and self._local.pid == os.getpid():
            if not (self._local.immutable and live):
                return conn
            conn.close()  # a writer appeared: an immutable snapshot would miss its writes
        if self.read_only:
            # No writer (no -wal file): `immutable` reads the file as is and creates nothing,
            # even on read-only storage. A live writer: plain read-only, sharing its -shm.
            mode = "mode=ro" if live else "mode=ro&immutable=1"
            uri = f"{self.path.resolve().as_uri()}?{mode}"
            conn = sqlite3.connect(
                uri, uri=True, timeout=self.busy_timeout_sec, isolation_level=None
            )
        else:
            conn = sqlite3.connect(self.path, timeout=self.busy_timeout_sec, isolation_level=None)
            # WAL: readers never block the writer; NORMAL sync is durable against process crashes.
            conn.execute("PRAGMA journal_mode = WAL")
            # A big transaction grows the WAL file; shrink it back once checkpointed.
            conn.execute("PRAGMA journal_size_limit = 67108864")
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_sec * 1000)}")
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.row_factory = sqlite3.Row
        self._local.conn, self._local.pid, self._local.immutable = conn, os.getpid(), not live
        return conn

    def close(self) -> None:
        """Close this thread's connection (others close when their thread or process ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None and self._local.pid == os.getpid():
            conn.close()
        self._local.conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise RolloutStoreError(f"{self.path} was opened read-only")
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """One snapshot for several SELECTs."""
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    # -- writes ------------------------------------------------------------------------------

    def start_attempt(
        self,
        *,
        task_id: str,
        role: Role = "solver",
        id: str | None = None,
        run_id: str = "",
        round: int = 0,
        category: str = "",
        policy_version: str = "",
        started_at: datetime | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Record that an attempt began; returns its id. A second call with the same id is a no-op."""
        attempt = Attempt(
            id=id or new_attempt_id(),
            run_id=run_id,
            round=round,
            role=role,
            task_id=task_id,
            category=category,
            policy_version=policy_version,
            started_at=started_at or _now(),
            metadata=metadata or {},
        )
        with self._write() as conn:
            self._insert_attempt(conn, attempt, on_conflict="DO NOTHING")
        return attempt.id

    def add_step(
        self,
        attempt_id: str,
        index: int,
        *,
        message: str | None = None,
        tool_name: str | None = None,
        tool_args: dict[str, Any] | None = None,
        tool_output: str | None = None,
        output_bytes: int | None = None,
        exit_code: int | None = None,
        duration_sec: float | None = None,
    ) -> Step:
        """Record one step; the same (attempt_id, index) again replaces it. Returns what was stored."""
        step = Step(
            attempt_id=attempt_id,
            index=index,
            message=message,
            tool_name=tool_name,
            tool_args=tool_args,
            tool_output=tool_output,
            output_bytes=output_bytes,
            exit_code=exit_code,
            duration_sec=duration_sec,
        )
        with self._write() as conn:
            self._require_attempt(conn, attempt_id)
            return self._insert_steps(conn, attempt_id, [step])[0]

    def finish_attempt(
        self,
        attempt_id: str,
        *,
        reward: float | None,
        outcome: Outcome,
        turns: int | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        cost: float | None = None,
        duration_sec: float | None = None,
        error: str | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Attempt:
        """Record an attempt's result. Counters left None keep their value; metadata is merged.

        `duration_sec` defaults to the time since `started_at`; `turns` to the number of steps
        when none was given before.
        """
        finished = _now()
        with self._write() as conn:
            current = self._require_attempt(conn, attempt_id)
            if turns is None and current.turns == 0:
                turns = conn.execute(
                    "SELECT count(*) FROM steps WHERE attempt_id = ?", (attempt_id,)
                ).fetchone()[0]
            updated = current.model_copy(
                update={
                    "reward": reward,
                    "outcome": outcome,
                    "turns": current.turns if turns is None else turns,
                    "prompt_tokens": current.prompt_tokens
                    if prompt_tokens is None
                    else prompt_tokens,
                    "completion_tokens": (
                        current.completion_tokens
                        if completion_tokens is None
                        else completion_tokens
                    ),
                    "cost": current.cost if cost is None else cost,
                    "duration_sec": (
                        (finished - current.started_at).total_seconds()
                        if duration_sec is None
                        else duration_sec
                    ),
                    "error": error if error is not None else current.error,
                    "finished_at": finished,
                    "metadata": {**current.metadata, **(metadata or {})},
                }
            )
            self._insert_attempt(conn, updated, on_conflict="UPDATE")
        return self._cap_attempt(updated)

    def record_attempt(self, attempt: Attempt, steps: Sequence[Step] = ()) -> str:
        """Write a whole attempt and its steps in one transaction (an upsert on the ids)."""
        self.record_attempts([(attempt, steps)])
        return attempt.id

    def record_attempts(self, items: Iterable[tuple[Attempt, Sequence[Step]]]) -> int:
        """Write many attempts with their steps in one transaction. Returns how many."""
        count = 0
        with self._write() as conn:
            for attempt, steps in items:
                self._insert_attempt(conn, attempt, on_conflict="UPDATE")
                self._insert_steps(conn, attempt.id, steps)
                count += 1
        return count

    def delete_attempts(self, ids: Iterable[str]) -> int:
        """Remove attempts and their steps in one transaction. Returns how many existed.

        For work a killed run left half-done and its resume redoes from the start (a gate's
        calibration): keeping both would count the same rollouts twice.
        """
        ids = list(ids)
        with self._write() as conn:
            conn.executemany("DELETE FROM steps WHERE attempt_id = ?", [(i,) for i in ids])
            return sum(
                conn.execute("DELETE FROM attempts WHERE id = ?", (i,)).rowcount for i in ids
            )

    def _cap_attempt(self, attempt: Attempt) -> Attempt:
        if attempt.error is None:
            return attempt
        return attempt.model_copy(update={"error": cap_text(attempt.error, self.output_cap).text})

    def _insert_attempt(
        self,
        conn: sqlite3.Connection,
        attempt: Attempt,
        *,
        on_conflict: Literal["DO NOTHING", "UPDATE"],
    ) -> None:
        attempt = self._cap_attempt(attempt)
        if on_conflict == "DO NOTHING":
            tail = "ON CONFLICT (id) DO NOTHING"
        else:
            # The identity of an attempt (run, role, task, start) never changes; its result may.
            sets = ", ".join(f"{name} = excluded.{name}" for name in _RESULT_FIELDS)
            tail = f"ON CONFLICT (id) DO UPDATE SET {sets}"
        conn.execute(
            f"INSERT INTO attempts ({ATTEMPTS.column_list}) "
            f"VALUES ({', '.join('?' * len(ATTEMPTS.columns))}) {tail}",
            ATTEMPTS.row(attempt),
        )

    def _insert_steps(
        self, conn: sqlite3.Connection, attempt_id: str, steps: Sequence[Step]
    ) -> list[Step]:
        stored, rows = [], []
        for step in steps:
            output_bytes = step.output_bytes
            output = step.tool_output
            if output is not None:
                capped = cap_text(output, self.output_cap)
                output = capped.text
                output_bytes = max(output_bytes or 0, capped.total_bytes)
            step = step.model_copy(
                update={
                    "attempt_id": attempt_id,
                    "tool_output": output,
                    "output_bytes": output_bytes or 0,
                }
            )
            stored.append(step)
            rows.append(STEPS.row(step))
        # The key (attempt_id, idx) stays; every other column is replaced.
        sets = ", ".join(f"{name} = excluded.{name}" for name in STEPS.columns[2:])
        conn.executemany(
            f"INSERT INTO steps ({STEPS.column_list}) "
            f"VALUES ({', '.join('?' * len(STEPS.columns))}) "
            f"ON CONFLICT (attempt_id, idx) DO UPDATE SET {sets}",
            rows,
        )
        return stored

    def _require_attempt(self, conn: sqlite3.Connection, attempt_id: str) -> Attempt:
        row = conn.execute(
            f"SELECT {ATTEMPTS.column_list} FROM attempts WHERE id = ?", (attempt_id,)
        ).fetchone()
        if row is None:
            raise AttemptNotFoundError(
                f"no attempt {attempt_id!r} in {self.path}: call start_attempt first"
            )
        return ATTEMPTS.load(row)

    # -- queries -----------------------------------------------------------------------------

    def get_attempt(self, attempt_id: str) -> Attempt:
        return self._require_attempt(self._conn(), attempt_id)

    def step_counts(self, attempt_ids: Iterable[str]) -> dict[str, tuple[int, int]]:
        """attempt id -> (steps with a tool call, steps without one), for the given attempts.

        A step without a tool call is a model turn that called no tool (agent_loop records one
        step per tool call, plus one per reply that made none). Attempts with no step are absent.
        """
        ids = list(dict.fromkeys(attempt_ids))
        counts: dict[str, tuple[int, int]] = {}
        with self._read() as conn:
            for start in range(0, len(ids), 500):  # under SQLite's bound-parameter limit
                chunk = ids[start : start + 500]
                for row in conn.execute(
                    "SELECT attempt_id, count(tool_name), count(*) - count(tool_name) FROM steps "
                    f"WHERE attempt_id IN ({', '.join('?' * len(chunk))}) GROUP BY attempt_id",
                    chunk,
                ):
                    counts[row[0]] = (row[1], row[2])
        return counts

    def list_attempts(
        self,
        *,
        role: Role | None = None,
        task_id: str | None = None,
        outcome: Outcome | Literal["running"] | None = None,
        policy_version: str | None = None,
        run_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> list[Attempt]:
        """Attempts matching every given filter, newest first."""
        where, args = [], []
        for column, value in (
            ("role", role),
            ("task_id", task_id),
            ("policy_version", policy_version),
            ("run_id", run_id),
        ):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if outcome == "running":
            where.append("outcome IS NULL")
        elif outcome is not None:
            where.append("outcome = ?")
            args.append(outcome)
        clause = f"WHERE {' AND '.join(where)}" if where else ""
        rows = (
            self._conn()
            .execute(
                f"SELECT {ATTEMPTS.column_list} FROM attempts {clause} ORDER BY seq DESC LIMIT ? OFFSET ?",
                (*args, limit, offset),
            )
            .fetchall()
        )
        return [ATTEMPTS.load(row) for row in rows]

    def trajectory(self, attempt_id: str) -> Trajectory:
        with self._read() as conn:
            attempt = self._require_attempt(conn, attempt_id)
            rows = conn.execute(
                f"SELECT {STEPS.column_list} FROM steps WHERE attempt_id = ? ORDER BY idx",
                (attempt_id,),
            ).fetchall()
        return Trajectory(attempt=attempt, steps=[STEPS.load(row) for row in rows])

    def pass_rates(
        self,
        by: Literal["task", "category"] = "task",
        policy_version: str | None = None,
        role: Role = "solver",
    ) -> list[PassRate]:
        """Pass rate per task (or category) and policy version over finished attempts."""
        column = {"task": "task_id", "category": "category"}.get(by)
        if column is None:
            raise ValueError(f"by must be 'task' or 'category', not {by!r}")
        args: list[Any] = [role]
        version_clause = ""
        if policy_version is not None:
            version_clause = "AND policy_version = ?"
            args.append(policy_version)
        rows = (
            self._conn()
            .execute(
                f"""
            SELECT {column} AS key, policy_version, count(*) AS attempts,
                   sum(outcome = 'solved') AS solved, sum(outcome = 'error') AS errors,
                   avg(reward) AS mean_reward
            FROM attempts
            WHERE role = ? AND outcome IS NOT NULL {version_clause}
            GROUP BY policy_version, {column}
            ORDER BY policy_version, {column}
            """,
                args,
            )
            .fetchall()
        )
        rates = []
        for row in rows:
            scored = row["attempts"] - row["errors"]
            rates.append(
                PassRate(
                    key=row["key"],
                    policy_version=row["policy_version"],
                    attempts=row["attempts"],
                    solved=row["solved"],
                    errors=row["errors"],
                    pass_rate=row["solved"] / scored if scored else None,
                    mean_reward=row["mean_reward"],
                )
            )
        return rates

    def recent_failures(
        self, limit: int = 20, role: Role | None = "solver", *, output_chars: int = 2000
    ) -> list[Failure]:
        """Newest failed / timed-out / errored attempts with the tail of their last error output."""
        args: list[Any] = list(FAILED_OUTCOMES)
        role_clause = ""
        if role is not None:
            role_clause = "AND role = ?"
            args.append(role)
        with self._read() as conn:
            rows = conn.execute(
                f"SELECT {ATTEMPTS.column_list} FROM attempts WHERE outcome IN (?, ?, ?) {role_clause} "
                "ORDER BY seq DESC LIMIT ?",
                (*args, limit),
            ).fetchall()
            failures = []
            for row in rows:
                attempt = ATTEMPTS.load(row)
                # Prefer the last step that failed; else whatever the attempt printed last.
                last = conn.execute(
                    "SELECT idx, tool_output FROM steps WHERE attempt_id = ? "
                    "AND tool_output IS NOT NULL "
                    "ORDER BY (exit_code IS NOT NULL AND exit_code != 0) DESC, idx DESC LIMIT 1",
                    (attempt.id,),
                ).fetchone()
                failures.append(
                    Failure(
                        attempt_id=attempt.id,
                        run_id=attempt.run_id,
                        round=attempt.round,
                        role=attempt.role,
                        task_id=attempt.task_id,
                        category=attempt.category,
                        policy_version=attempt.policy_version,
                        outcome=attempt.outcome,  # type: ignore[arg-type]
                        reward=attempt.reward,
                        turns=attempt.turns,
                        started_at=attempt.started_at,
                        error=tail_text(attempt.error, output_chars).text
                        if attempt.error
                        else None,
                        last_error_output=(
                            tail_text(last["tool_output"], output_chars).text if last else None
                        ),
                        last_error_step=last["idx"] if last else None,
                    )
                )
        return failures

    def search(self, text: str, limit: int = 20, *, raw: bool = False) -> list[SearchHit]:
        """Full-text search over tool outputs and attempt errors, best matches first.

        `text` is matched as words that must all appear (any order); `raw=True` passes it to
        FTS5 unchanged (phrases, OR, NEAR, prefix*). Ranking (bm25) covers the newest
        `SEARCH_WINDOW` matches of each table: every match of a rare term, the recent ones of a
        common phrase.
        """
        query = text if raw else _fts_words(text)
        if not query:
            return []
        try:
            with self._read() as conn:
                rows = conn.execute(
                    """
                    -- bm25 over every match of a common word costs ~2.5 us a match (120 ms
                    -- for 50k of 110k steps): rank only the newest SEARCH_WINDOW matches (a
                    -- rowid range FTS5 applies inside its cursor; finding it is ~1 ms), and
                    -- build snippets only for the rows returned.
                    SELECT * FROM (
                        SELECT s.attempt_id, s.idx AS step_index, 'tool_output' AS kind,
                               f.snippet, f.rank
                        FROM (
                            SELECT rowid, rank,
                                   snippet(steps_fts, 0, '[', ']', ' … ', 24) AS snippet
                            FROM steps_fts WHERE steps_fts MATCH :q AND rowid >= coalesce((
                                SELECT min(rowid) FROM (
                                    SELECT rowid FROM steps_fts WHERE steps_fts MATCH :q
                                    ORDER BY rowid DESC LIMIT :window)), 0)
                            ORDER BY rank LIMIT :limit
                        ) f JOIN steps s ON s.seq = f.rowid
                    )
                    UNION ALL
                    SELECT * FROM (
                        SELECT a.id, NULL, 'error', f.snippet, f.rank
                        FROM (
                            SELECT rowid, rank,
                                   snippet(attempts_fts, 0, '[', ']', ' … ', 24) AS snippet
                            FROM attempts_fts WHERE attempts_fts MATCH :q AND rowid >= coalesce((
                                SELECT min(rowid) FROM (
                                    SELECT rowid FROM attempts_fts WHERE attempts_fts MATCH :q
                                    ORDER BY rowid DESC LIMIT :window)), 0)
                            ORDER BY rank LIMIT :limit
                        ) f JOIN attempts a ON a.seq = f.rowid
                    )
                    ORDER BY rank LIMIT :limit
                    """,
                    {"q": query, "limit": limit, "window": SEARCH_WINDOW},
                ).fetchall()
                attempts = (
                    {
                        row["id"]: row
                        for row in conn.execute(
                            "SELECT id, task_id, role, outcome FROM attempts WHERE id IN "
                            f"({', '.join('?' * len(rows))})",
                            [row["attempt_id"] for row in rows],
                        )
                    }
                    if rows
                    else {}
                )
        except sqlite3.OperationalError as exc:
            raise RolloutStoreError(f"bad search query {text!r}: {exc}") from exc
        return [
            SearchHit(
                attempt_id=row["attempt_id"],
                task_id=attempts[row["attempt_id"]]["task_id"],
                role=attempts[row["attempt_id"]]["role"],
                outcome=attempts[row["attempt_id"]]["outcome"],
                kind=row["kind"],
                step_index=row["step_index"],
                snippet=row["snippet"],
            )
            for row in rows
        ]

    def summary(self) -> StoreSummary:
        with self._read() as conn:
            totals = conn.execute(
                """
                SELECT count(*) AS attempts, sum(outcome IS NULL) AS running,
                       count(DISTINCT run_id) AS runs, count(DISTINCT task_id) AS tasks,
                       avg(reward) AS mean_reward, total(prompt_tokens) AS prompt_tokens,
                       total(completion_tokens) AS completion_tokens, total(cost) AS cost,
                       min(started_at) AS first, max(started_at) AS last
                FROM attempts
                """
            ).fetchone()
            steps = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
            by_role = dict(
                conn.execute("SELECT role, count(*) FROM attempts GROUP BY role").fetchall()
            )
            by_outcome = dict(
                conn.execute(
                    "SELECT coalesce(outcome, 'running'), count(*) FROM attempts GROUP BY outcome"
                ).fetchall()
            )
            versions = [
                row[0]
                for row in conn.execute(
                    "SELECT policy_version FROM attempts GROUP BY policy_version ORDER BY min(seq)"
                )
            ]
            version = conn.execute("PRAGMA user_version").fetchone()[0]
        return StoreSummary(
            path=str(self.path),
            schema_version=version,
            attempts=totals["attempts"],
            running=totals["running"] or 0,
            steps=steps,
            by_role=by_role,
            by_outcome=by_outcome,
            runs=totals["runs"],
            tasks=totals["tasks"],
            policy_versions=versions,
            mean_reward=totals["mean_reward"],
            prompt_tokens=int(totals["prompt_tokens"]),
            completion_tokens=int(totals["completion_tokens"]),
            cost=totals["cost"],
            first_started_at=totals["first"],
            last_started_at=totals["last"],
        )

    # -- export ------------------------------------------------------------------------------

    def iter_trajectories(
        self, *, role: Role | None = None, batch: int = 500
    ) -> Iterator[Trajectory]:
        """Every attempt with its steps, oldest first, read in batches (bounded memory)."""
        conn = self._conn()
        last_seq = 0
        role_clause, role_args = ("AND role = ?", [role]) if role else ("", [])
        while True:
            rows = conn.execute(
                f"SELECT seq, {ATTEMPTS.column_list} FROM attempts WHERE seq > ? {role_clause} "
                "ORDER BY seq LIMIT ?",
                (last_seq, *role_args, batch),
            ).fetchall()
            if not rows:
                return
            last_seq = rows[-1]["seq"]
            ids = [row["id"] for row in rows]
            steps: dict[str, list[Step]] = {attempt_id: [] for attempt_id in ids}
            for step_row in conn.execute(
                f"SELECT {STEPS.column_list} FROM steps WHERE attempt_id IN ({', '.join('?' * len(ids))}) "
                "ORDER BY attempt_id, idx",
                ids,
            ):
                steps[step_row["attempt_id"]].append(STEPS.load(step_row))
            for row in rows:
                yield Trajectory(attempt=ATTEMPTS.load(row), steps=steps[row["id"]])

    def to_jsonl(self, path: str | os.PathLike[str], *, role: Role | None = None) -> int:
        """One JSON line per attempt (its fields plus `steps`). Returns the number of lines."""
        count = 0
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("w", encoding="utf-8") as out:
            for trajectory in self.iter_trajectories(role=role):
                record = trajectory.attempt.model_dump(mode="json")
                record["steps"] = [
                    step.model_dump(mode="json", exclude={"attempt_id"})
                    for step in trajectory.steps
                ]
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
        return count

    def to_hf_dataset(self, *, role: Role | None = None) -> datasets.Dataset:
        """A Hugging Face dataset, one row per attempt with its steps as a list column.

        Free-form dicts (metadata, tool_args) are JSON strings so every row has one schema.
        """
        import datasets  # lazy: heavy, and only exports need it

        features = datasets.Features(
            {
                **ATTEMPTS.features(),
                "steps": datasets.List(STEPS.features(exclude=("attempt_id",))),
            }
        )
        rows = []
        for trajectory in self.iter_trajectories(role=role):
            record = ATTEMPTS.record(trajectory.attempt)
            record["steps"] = [STEPS.record(s, exclude=("attempt_id",)) for s in trajectory.steps]
            rows.append(record)
        return datasets.Dataset.from_list(rows, features=features)


def _fts_words(text: str) -> str:
    """Quote each word so FTS5 syntax characters in a user's text cannot break the query."""
    words = [word.replace('"', '""') for word in text.split()]
    return " ".join(f'"{word}"' for word in words if word)
