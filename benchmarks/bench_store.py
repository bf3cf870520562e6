"""Rollout store: insert rates and query latencies over a synthetic store.

.venv/bin/python benchmarks/bench_store.py                       # 10k attempts / 100k steps
.venv/bin/python benchmarks/bench_store.py --attempts 100000 --steps 1000000
.venv/bin/python benchmarks/bench_store.py --store postgresql://user@host/db   # an empty database
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore

WORDS = (
    "error",
    "warning",
    "installed",
    "collected",
    "passed",
    "failed",
    "Traceback",
    "numpy",
    "make",
    "gcc",
    "undefined",
    "reference",
    "permission",
    "denied",
    "timeout",
    "segfault",
    "pip",
    "apt",
    "ok",
    "done",
    "file",
    "not",
    "found",
    "module",
    "import",
    "build",
    "test",
)
OUTCOMES = ("solved", "failed", "failed", "timeout", "error")


def synthetic(n_attempts: int, n_steps: int, seed: int = 0, prefix: str = "a"):
    """(attempt, steps) pairs: n_steps spread over n_attempts, ~200-byte outputs."""
    rng = random.Random(seed)
    per, extra = divmod(n_steps, n_attempts)
    for i in range(n_attempts):
        outcome = rng.choice(OUTCOMES)
        attempt = Attempt(
            id=f"{prefix}{i}",
            run_id=f"run{i % 3}",
            round=i % 10,
            role="solver" if i % 5 else "proposer",
            task_id=f"task{i % 500}",
            category=f"cat{i % 12}",
            policy_version=f"v{i % 4}",
            outcome=outcome,
            reward=1.0 if outcome == "solved" else 0.0,
            turns=per,
            prompt_tokens=rng.randint(100, 5000),
            completion_tokens=rng.randint(10, 500),
            cost=0.001,
            duration_sec=rng.random() * 60,
            error="verifier failed: " + " ".join(rng.choices(WORDS, k=8))
            if outcome != "solved"
            else None,
        )
        steps = [
            Step(
                index=j,
                message="thinking",
                tool_name="run",
                tool_args={"command": "make"},
                tool_output=" ".join(rng.choices(WORDS, k=30))
                + (" xyzzy" if j == 0 and i % 100 == 0 else ""),
                exit_code=rng.choice((0, 0, 1)),
                duration_sec=0.01,
            )
            for j in range(per + (1 if i < extra else 0))
        ]
        yield attempt, steps


def timed(fn: Callable[[], object], repeat: int = 5) -> float:
    """Median seconds of `repeat` calls."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _writer(path: str, name: str, count: int) -> None:
    store = RolloutStore(path)
    for attempt, steps in synthetic(count, count * 5, seed=hash(name) % 1000, prefix=f"{name}-"):
        store.record_attempt(attempt, steps)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--attempts", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="attempts per bulk transaction")
    parser.add_argument("--writers", type=int, default=4, help="processes in the concurrent test")
    parser.add_argument("--db", type=Path, help="database file (default: a temporary one)")
    parser.add_argument(
        "--store", help="a postgresql:// URL of an empty database (default: SQLite, --db)"
    )
    parser.add_argument("--json", type=Path, help="also write the timings here (run_all)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        path = args.store or str(args.db or Path(tmp) / "bench.db")
        store = RolloutStore(path)
        backend = "PostgreSQL" if store.postgres else "SQLite"
        if store.summary().attempts:
            raise SystemExit(f"{store.name} is not empty: the timings need an empty store")
        rows: list[tuple[str, str, str]] = []

        start = time.perf_counter()
        for _ in synthetic(min(args.attempts, 2000), min(args.steps, 20_000)):
            pass
        gen_rate = min(args.steps, 20_000) / (time.perf_counter() - start)  # model building alone

        start = time.perf_counter()
        batch: list = []
        for item in synthetic(args.attempts, args.steps):
            batch.append(item)
            if len(batch) >= args.batch:
                store.record_attempts(batch)
                batch = []
        if batch:
            store.record_attempts(batch)
        took = time.perf_counter() - start
        db_only = took - args.steps / gen_rate
        rows.append(
            (
                f"bulk insert {args.attempts:,} attempts / {args.steps:,} steps",
                f"{took:.1f} s",
                f"{args.steps / took:,.0f} steps/s, {args.attempts / took:,.0f} attempts/s",
            )
        )
        rows.append(
            (
                f"  of which {backend} (minus building the models)",
                f"{db_only:.1f} s",
                f"{args.steps / db_only:,.0f} steps/s",
            )
        )

        live = 300
        start = time.perf_counter()
        for attempt, steps in synthetic(live, live * 10, seed=1, prefix="live"):
            attempt_id = store.start_attempt(id=attempt.id, task_id=attempt.task_id)
            for step in steps:
                store.add_step(attempt_id, step.index, tool_output=step.tool_output, exit_code=0)
            store.finish_attempt(attempt_id, reward=1.0, outcome="solved")
        took = time.perf_counter() - start
        rows.append(
            (
                f"live path: start + 10 add_step + finish ({live} attempts)",
                f"{took:.2f} s",
                f"{live * 12 / took:,.0f} transactions/s",
            )
        )

        start = time.perf_counter()
        for attempt, steps in synthetic(live, live * 10, seed=2, prefix="rec"):
            store.record_attempt(attempt, steps)
        took = time.perf_counter() - start
        rows.append(
            (
                f"record_attempt, 10 steps, 1 transaction each ({live})",
                f"{took:.2f} s",
                f"{live / took:,.0f} attempts/s",
            )
        )

        per_writer = 200
        ctx = multiprocessing.get_context("spawn")
        procs = [
            ctx.Process(target=_writer, args=(str(path), f"w{n}", per_writer))
            for n in range(args.writers)
        ]
        start = time.perf_counter()
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join()
        took = time.perf_counter() - start
        rows.append(
            (
                f"{args.writers} writer processes x {per_writer} record_attempt (5 steps)",
                f"{took:.2f} s",
                f"{args.writers * per_writer / took:,.0f} attempts/s (incl. start-up)",
            )
        )

        store = RolloutStore(path)  # fresh connection: no warm statement cache
        summary = store.summary()
        for label, fn in (
            ("summary()", store.summary),
            ("pass_rates(by='task')", lambda: store.pass_rates("task")),
            (
                "pass_rates(by='category', policy_version='v1')",
                lambda: store.pass_rates("category", "v1"),
            ),
            ("recent_failures(20)", lambda: store.recent_failures(20)),
            ("search('xyzzy'): in 1% of attempts", lambda: store.search("xyzzy")),
            (
                "search('undefined reference'): in most steps",
                lambda: store.search("undefined reference"),
            ),
            *(
                [
                    (
                        "  same search, ranking every match (the query before #18)",
                        lambda: _old_search(store, '"undefined" "reference"'),
                    )
                ]
                if not store.postgres  # FTS5's own query
                else []
            ),
            ("trajectory(one attempt)", lambda: store.trajectory("a0")),
            ("list_attempts(task_id=..., limit=50)", lambda: store.list_attempts(task_id="task7")),
        ):
            rows.append((label, f"{timed(fn) * 1000:.1f} ms", ""))
        note = f"{summary.attempts:,} attempts, {summary.steps:,} steps"
        if store.postgres:
            size = (
                store._conn()
                .execute(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                    "WHERE c.relname IN ('attempts', 'steps', 'transcripts') "
                    "AND pg_table_is_visible(c.oid)"
                )
                .fetchone()[0]
            )
            rows.append(
                ("database size (tables, indexes, TOAST)", f"{float(size) / 1e6:.0f} MB", note)
            )
        else:
            wal = Path(f"{path}-wal")
            wal_mb = wal.stat().st_size / 1e6 if wal.exists() else 0
            note += f"; WAL {wal_mb:.0f} MB"
            rows.append(("database size", f"{Path(path).stat().st_size / 1e6:.0f} MB", note))

    table = Table("operation", "time", "rate / note", title=f"rollout store ({backend})")
    for row in rows:
        table.add_row(*row)
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps({label: value for label, value, _ in rows}, indent=2))


def _old_search(store: RolloutStore, query: str, limit: int = 20) -> list:
    """The search query before #18: bm25 and snippet computed for every match."""
    with store._read() as conn:
        return conn.execute(
            """
            SELECT * FROM (
                SELECT s.attempt_id, s.idx AS step_index, 'tool_output' AS kind,
                       snippet(steps_fts, 0, '[', ']', ' … ', 24) AS snippet,
                       bm25(steps_fts) AS rank
                FROM steps_fts JOIN steps s ON s.seq = steps_fts.rowid
                WHERE steps_fts MATCH ?
                ORDER BY rank LIMIT ?
            )
            UNION ALL
            SELECT * FROM (
                SELECT a.id, NULL, 'error',
                       snippet(attempts_fts, 0, '[', ']', ' … ', 24), bm25(attempts_fts)
                FROM attempts_fts JOIN attempts a ON a.seq = attempts_fts.rowid
                WHERE attempts_fts MATCH ?
                ORDER BY bm25(attempts_fts) LIMIT ?
            )
            ORDER BY rank LIMIT ?
            """,
            (query, limit, query, limit, limit),
        ).fetchall()


if __name__ == "__main__":
    main()
