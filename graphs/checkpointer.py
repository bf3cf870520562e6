"""The run's LangGraph checkpointer: SQLite in the run folder, or PostgreSQL given a URL.

Either way the saver restores the flywheel state's models (`checkpoint_serde`). On PostgreSQL
several runs share one database: each run is its own thread, named after its run folder
(`flywheel:<folder name>`), so a run is resumed from any machine that reaches the database and
has the run folder (its pool, candidates and checkpoints are files there), and a second run
started under a taken name is refused as "already holds a run" before anything is written.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiosqlite
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from ..tools.rollouts.postgres import is_postgres_url

#: The thread of a run whose checkpoints are a SQLite file of its own.
SQLITE_THREAD = "flywheel"
#: pg_advisory_lock key around the saver's setup: two runs starting at once on a fresh database
#: would otherwise race on CREATE TABLE ("checkpt" in ASCII).
_SETUP_LOCK = 0x636865636B707400


def run_thread(run_dir: Path, location: str) -> str:
    """The run's thread id: one per SQLite file, one per run folder name on PostgreSQL."""
    return f"flywheel:{Path(run_dir).name}" if is_postgres_url(location) else SQLITE_THREAD


async def _try_lock(conn: Any) -> bool:
    cursor = await conn.execute("SELECT pg_try_advisory_lock(%s) AS locked", (_SETUP_LOCK,))
    row = await cursor.fetchone()
    return bool(row["locked"] if isinstance(row, dict) else row[0])


@asynccontextmanager
async def open_saver(location: str | Path, serde: SerializerProtocol) -> AsyncIterator[Any]:
    """An AsyncPostgresSaver (tables created once, under a lock) for a postgresql:// URL, else an
    AsyncSqliteSaver on the file."""
    if is_postgres_url(str(location)):
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

        async with AsyncPostgresSaver.from_conn_string(str(location), serde=serde) as saver:
            conn: Any = saver.conn
            # Polled, never waited on: setup()'s CREATE INDEX CONCURRENTLY waits for every running
            # statement, a blocked pg_advisory_lock included, and the server then reports a
            # deadlock (seen with two runs starting on one database).
            while not await _try_lock(conn):  # noqa: ASYNC110 - the lock is in another process
                await asyncio.sleep(0.05)
            try:
                await saver.setup()
            finally:
                await conn.execute("SELECT pg_advisory_unlock(%s)", (_SETUP_LOCK,))
            yield saver
        return

    async with aiosqlite.connect(str(location)) as sqlite_conn:
        yield AsyncSqliteSaver(sqlite_conn, serde=serde)
