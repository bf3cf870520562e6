"""The rollout store on PostgreSQL: one psycopg 3 connection per process and thread, speaking the
SQLite dialect the queries are written in (`?` and `:name` placeholders, rows indexed by position
or by name), so queries.py and store.py keep one text for both backends.

A store location is a PostgreSQL URL (`postgresql://user@host/db`, `postgres://…`, libpq's
`host=/run/sock` query parameters included) or else a SQLite file. Needs the `postgres` extra.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

URL_PREFIXES = ("postgresql://", "postgres://")
_PLACEHOLDER = re.compile(r"\?|(?<![:\w]):([A-Za-z_]\w*)")
_PASSWORD = re.compile(r"(://[^:/@?]*:)[^@/?]*@")


def is_postgres_url(location: object) -> bool:
    """Whether a store location names a PostgreSQL database (else it is a SQLite file)."""
    return isinstance(location, str) and location.startswith(URL_PREFIXES)


def redacted(url: str) -> str:
    """The URL as messages may show it: no password."""
    return _PASSWORD.sub(r"\1***@", url)


@functools.lru_cache(maxsize=512)
def translate(sql: str) -> str:
    """SQLite placeholders -> psycopg's: `?` -> `%s`, `:name` -> `%(name)s` (a literal % doubled).

    The queries hold no `?` or `:word` inside string literals; `::type` casts are left alone."""
    sql = sql.replace("%", "%%")
    return _PLACEHOLDER.sub(lambda m: f"%({m.group(1)})s" if m.group(1) else "%s", sql)


class Row(tuple):
    """A result row like sqlite3.Row: `row[0]` or `row["column"]`, and a 2-tuple for dict()."""

    names: Mapping[str, int] = {}

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return tuple.__getitem__(self, self.names[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.names)


def _row_factory(cursor: Any) -> Any:
    names = {col.name: i for i, col in enumerate(cursor.description or ())}
    cls = type("Row", (Row,), {"names": names})
    return lambda values: cls(values)


def _clean(value: Any) -> Any:
    # PostgreSQL text cannot hold NUL (SQLite can): a sandbox's output may; keep the rest of it.
    return value.replace("\x00", "\ufffd") if isinstance(value, str) and "\x00" in value else value


def _params(params: Any) -> Any:
    if isinstance(params, Mapping):
        return {k: _clean(v) for k, v in params.items()}
    return [_clean(v) for v in params]


class PgConnection:
    """A psycopg connection in autocommit mode with sqlite3.Connection's execute / executemany."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    @classmethod
    def connect(cls, url: str, *, read_only: bool, lock_timeout_sec: float) -> PgConnection:
        import psycopg

        raw = psycopg.connect(url, autocommit=True, row_factory=_row_factory, connect_timeout=30)
        # The busy timeout's counterpart: wait for a row lock this long, then fail.
        conn = cls(raw)
        conn.execute(f"SET lock_timeout = {int(lock_timeout_sec * 1000)}")
        if read_only:
            conn.execute("SET default_transaction_read_only = on")
        return conn

    def execute(self, sql: str, params: Sequence[Any] | Mapping[str, Any] = ()) -> Any:
        # The queries are built from constants, as for SQLite; psycopg's typing wants literals.
        raw: Any = self.raw
        return raw.execute(translate(sql), _params(params))

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any:
        cursor: Any = self.raw.cursor()
        cursor.executemany(translate(sql), [_params(row) for row in rows])
        return cursor

    @contextmanager
    def transaction(self, *, snapshot: bool = False) -> Iterator[PgConnection]:
        with self.raw.transaction():
            if snapshot:  # one view of the data for several SELECTs, like a SQLite read
                self.raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield self

    def close(self) -> None:
        self.raw.close()

    def detach(self) -> None:
        """Forget a connection inherited through fork without closing the parent's session:
        libpq's goodbye would end it, so the child's copy of the socket becomes /dev/null."""
        try:
            fd = self.raw.pgconn.socket
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, fd)
            os.close(null)
        except Exception:  # noqa: BLE001 - already closed: nothing to protect
            pass
        _INHERITED.append(self)


#: Connections a forked child inherited: kept alive so they are never finalized there.
_INHERITED: list[PgConnection] = []
