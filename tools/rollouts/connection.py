"""The rollout store's SQLite connections: one per process and thread, WAL, read-only snapshots.

Safe with several writer processes: every write is one IMMEDIATE transaction (`_write`) and waits
on the busy timeout instead of failing; a read of several SELECTs is one snapshot (`_read`).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Self

from autoenvscaling.tools.rollouts.models import (
    ATTEMPTS,
    Attempt,
    AttemptNotFoundError,
    RolloutStoreError,
)
from autoenvscaling.tools.rollouts.schema import (
    SCHEMA_VERSION,
    SchemaOutdatedError,
    check_version,
    migrate,
)

DEFAULT_OUTPUT_CAP = 16 * 1024


class StoreConnection:
    """The connection side of `RolloutStore(path)`; methods may be called from any process or thread."""

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

    def _require_attempt(self, conn: sqlite3.Connection, attempt_id: str) -> Attempt:
        row = conn.execute(
            f"SELECT {ATTEMPTS.column_list} FROM attempts WHERE id = ?", (attempt_id,)
        ).fetchone()
        if row is None:
            raise AttemptNotFoundError(
                f"no attempt {attempt_id!r} in {self.path}: call start_attempt first"
            )
        return ATTEMPTS.load(row)
