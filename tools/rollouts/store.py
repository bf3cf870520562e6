"""The rollout store: one row per solver/proposer attempt, one row per step, in SQLite (WAL) or,
given a `postgresql://` URL, in PostgreSQL (postgres.py, pg_schema.py, pg_search.py).

The write side lives here, queries in queries.py, connections in connection.py.

Safe with several writer processes: every write is one IMMEDIATE transaction and waits on the
busy timeout instead of failing; each process and thread gets its own connection. Writes are
idempotent on the caller's attempt id (and step index), so a resumed run that records an attempt
again updates it instead of duplicating it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from ..text_cap import cap_text
from .models import (
    ATTEMPTS,
    STEPS,
    Attempt,
    Outcome,
    Role,
    Step,
    new_attempt_id,
    now_utc,
)
from .queries import StoreQueries

if TYPE_CHECKING:
    import datasets

#: What identifies an attempt never changes; a re-recorded attempt updates every other column.
_IDENTITY = ("id", "run_id", "round", "role", "task_id", "category", "policy_version", "started_at")
_RESULT_FIELDS = tuple(c for c in ATTEMPTS.columns if c not in _IDENTITY)


class RolloutStore(StoreQueries):
    """`RolloutStore(path)`; methods may be called from any process or thread."""

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
            started_at=started_at or now_utc(),
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
            self._require_attempt(conn, attempt_id, lock=True)
            return self._insert_steps(conn, attempt_id, [step])[0]

    def add_steps(self, attempt_id: str, steps: Sequence[Step]) -> list[Step]:
        """Record many steps of one attempt in one transaction (each as `add_step` would: the
        same (attempt_id, index) again replaces it; `attempt_id` on the steps is ignored).
        Returns what was stored."""
        with self._write() as conn:
            self._require_attempt(conn, attempt_id, lock=True)
            return self._insert_steps(conn, attempt_id, steps)

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
        finished = now_utc()
        with self._write() as conn:
            current = self._require_attempt(conn, attempt_id, lock=True)
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
        conn: Any,
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

    def _insert_steps(self, conn: Any, attempt_id: str, steps: Sequence[Step]) -> list[Step]:
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

    # -- export ------------------------------------------------------------------------------

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
