"""The rollout store's connections: one per process and thread, WAL, read-only snapshots.

Safe with several writer processes: every write is one IMMEDIATE transaction (`_write`) and waits
on the busy timeout instead of failing; a read of several SELECTs is one snapshot (`_read`).
A PostgreSQL URL instead of a file opens the same store on a server (postgres.py): a write is one
transaction, a row it reads before changing is locked (`_require_attempt(lock=True)`), a read is
one REPEATABLE READ snapshot.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from . import pg_schema
from .models import (
    ATTEMPTS,
    Attempt,
    AttemptNotFoundError,
    RolloutStoreError,
)
from .postgres import PgConnection, is_postgres_url, redacted
from .schema import (
    SCHEMA_VERSION,
    SchemaOutdatedError,
    check_version,
    migrate,
)

DEFAULT_OUTPUT_CAP = 16 * 1024


class StoreConnection:
    """The connection side of `RolloutStore(location)`: a SQLite file, or a PostgreSQL URL
    (`postgresql://...`); methods may be called from any process or thread."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        read_only: bool = False,
        busy_timeout_sec: float = 60.0,
        output_cap: int = DEFAULT_OUTPUT_CAP,
    ) -> None:
        #: What opened it: the file's path or the URL (transcripts are found from it).
        self.location = str(path) if is_postgres_url(str(path)) else str(Path(path))
        self.postgres = is_postgres_url(self.location)
        #: How messages name it: the path, or the URL without its password.
        self.name = redacted(self.location) if self.postgres else self.location
        self._path = Path(path) if not self.postgres else None
        self.read_only = read_only
        self.busy_timeout_sec = busy_timeout_sec
        self.output_cap = output_cap
        self._local = threading.local()
        if self.postgres:
            self._open_postgres()
        elif read_only:
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

    @property
    def path(self) -> Path:
        """The SQLite file (a PostgreSQL store has none: use `location`)."""
        if self._path is None:
            raise RolloutStoreError(f"{self.name} is a PostgreSQL store, not a file")
        return self._path

    def _open_postgres(self) -> None:
        try:
            import psycopg
        except ImportError:
            raise RolloutStoreError(
                f"{self.name}: a PostgreSQL store needs the postgres extra "
                "(pip install 'autoenvscaling[postgres]')"
            ) from None

        try:
            conn = self._pg()
            if self.read_only:
                version = pg_schema.check_version(conn, self.name)
                if version is None:
                    raise RolloutStoreError(f"no rollout store at {self.name}")
                if version < pg_schema.SCHEMA_VERSION:
                    raise SchemaOutdatedError(
                        f"{self.name} has rollout schema v{version} (current "
                        f"v{pg_schema.SCHEMA_VERSION}): open it once read-write to migrate"
                    )
            else:
                pg_schema.migrate(conn, self.name)
        except psycopg.OperationalError as exc:
            raise RolloutStoreError(f"cannot open the rollout store {self.name}: {exc}") from None

    def _pg(self) -> PgConnection:
        """This thread's PostgreSQL connection (a forked child's inherited one is detached)."""
        conn: PgConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            if self._local.pid == os.getpid():
                return conn
            conn.detach()
        conn = PgConnection.connect(
            self.location, read_only=self.read_only, lock_timeout_sec=self.busy_timeout_sec
        )
        self._local.conn, self._local.pid = conn, os.getpid()
        return conn

    def _schema_version(self, conn: Any) -> int:
        if self.postgres:
            return pg_schema.schema_version(conn) or 0
        return int(conn.execute("PRAGMA user_version").fetchone()[0])

    # -- session locks (PostgreSQL) ----------------------------------------------------------

    def try_session_lock(self, key: str) -> bool:
        """PostgreSQL's session-level advisory lock on `key`, taken on this thread's connection
        if free: held until `release_session_lock` or the connection ends (tools/rollouts/
        claims.py: the coordinators' claim on an attempt)."""
        if not self.postgres:
            raise RolloutStoreError("session locks need a PostgreSQL store (SQLite: one process)")
        sql = "SELECT pg_try_advisory_lock(hashtextextended(?, 0))"
        return bool(self._conn().execute(sql, (key,)).fetchone()[0])

    def release_session_lock(self, key: str) -> None:
        if not self.postgres:
            raise RolloutStoreError("session locks need a PostgreSQL store (SQLite: one process)")
        self._conn().execute("SELECT pg_advisory_unlock(hashtextextended(?, 0))", (key,))

    # -- connections -------------------------------------------------------------------------

    def _conn(self) -> Any:
        """This thread's connection (sqlite3.Connection or PgConnection: the same execute,
        executemany and rows); a forked child opens its own instead of sharing the parent's."""
        if self.postgres:
            return self._pg()
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
    def _write(self) -> Iterator[Any]:
        if self.read_only:
            raise RolloutStoreError(f"{self.name} was opened read-only")
        if self.postgres:
            with self._pg().transaction() as pg:
                yield pg
            return
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[Any]:
        """One snapshot for several SELECTs."""
        if self.postgres:
            with self._pg().transaction(snapshot=True) as pg:
                yield pg
            return
        conn = self._conn()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def _require_attempt(self, conn: Any, attempt_id: str, *, lock: bool = False) -> Attempt:
        """The attempt; `lock` (inside a write): PostgreSQL holds its row until the commit, so
        concurrent writers of one attempt take turns as SQLite's one writer at a time does."""
        row = conn.execute(
            f"SELECT {ATTEMPTS.column_list} FROM attempts WHERE id = ?"
            + (" FOR UPDATE" if lock and self.postgres else ""),
            (attempt_id,),
        ).fetchone()
        if row is None:
            raise AttemptNotFoundError(
                f"no attempt {attempt_id!r} in {self.name}: call start_attempt first"
            )
        return ATTEMPTS.load(row)
