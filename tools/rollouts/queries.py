"""The rollout store's reads: attempts, trajectories, pass rates, failures, search, summary."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any, Literal

from ..text_cap import tail_text
from . import pg_search
from .connection import StoreConnection
from .models import (
    ATTEMPTS,
    FAILED_OUTCOMES,
    STEPS,
    Attempt,
    Failure,
    Outcome,
    PassRate,
    Role,
    RolloutStoreError,
    SearchHit,
    Step,
    StoreSummary,
    Trajectory,
)

#: Matches ranked per search and table, newest first (see StoreQueries.search).
SEARCH_WINDOW = 5000


class StoreQueries(StoreConnection):
    """The read side of `RolloutStore`: every query, on this thread's connection."""

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
        round: int | None = None,
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
            ("round", round),
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
                   sum(CASE WHEN outcome = 'solved' THEN 1 ELSE 0 END) AS solved,
                   sum(CASE WHEN outcome = 'error' THEN 1 ELSE 0 END) AS errors,
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
        if self.postgres:
            return self._search_postgres(text, limit, raw=raw)
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
        return _hits(rows, attempts)

    def _search_postgres(self, text: str, limit: int, *, raw: bool) -> list[SearchHit]:
        """`search` with PostgreSQL's full-text search (pg_search.py): same words, same hits."""
        query = pg_search.tsquery(text, raw=raw)
        if query is None:
            return []
        sql, params = query
        with self._read() as conn:
            rows = conn.execute(
                pg_search.search_sql(pg_search.named(sql)),
                pg_search.search_params(params, limit=limit, window=SEARCH_WINDOW),
            ).fetchall()
            ids = list(dict.fromkeys(row["attempt_id"] for row in rows))
            attempts = (
                {
                    row["id"]: row
                    for row in conn.execute(
                        "SELECT id, task_id, role, outcome FROM attempts WHERE id IN "
                        f"({', '.join('?' * len(ids))})",
                        ids,
                    )
                }
                if ids
                else {}
            )
        return _hits(rows, attempts)

    def summary(self) -> StoreSummary:
        with self._read() as conn:
            totals = conn.execute(
                """
                SELECT count(*) AS attempts,
                       sum(CASE WHEN outcome IS NULL THEN 1 ELSE 0 END) AS running,
                       count(DISTINCT run_id) AS runs, count(DISTINCT task_id) AS tasks,
                       avg(reward) AS mean_reward,
                       coalesce(sum(prompt_tokens), 0.0) AS prompt_tokens,
                       coalesce(sum(completion_tokens), 0.0) AS completion_tokens,
                       coalesce(sum(cost), 0.0) AS cost,
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
            version = self._schema_version(conn)
        return StoreSummary(
            path=self.name,
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
            cost=float(totals["cost"]),
            first_started_at=totals["first"],
            last_started_at=totals["last"],
        )

    # -- reading everything ------------------------------------------------------------------------------

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


def _hits(rows: list[Any], attempts: dict[str, Any]) -> list[SearchHit]:
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


def _fts_words(text: str) -> str:
    """Quote each word so FTS5 syntax characters in a user's text cannot break the query."""
    words = [word.replace('"', '""') for word in text.split()]
    return " ".join(f'"{word}"' for word in words if word)
