"""A process's kept rollout store: one open store per location, written off the event loop.

Opening a `RolloutStore` per write costs a connection, a schema check and, when the last
connection closes, a WAL checkpoint with its sync (19.7 ms against 0.8 ms on a kept connection,
measured in benchmarks/RESULTS.md). Episodes that run on one event loop share a `KeptStore` per
location instead: its calls run in order on one worker thread of its own, on a connection that
stays open, so the loop never waits on SQLite or PostgreSQL.

The store's guarantees are unchanged: each call's writes are the store's own transactions,
committed before the awaited call returns; a killed process leaves its committed rows in the WAL,
which the next open recovers (tests/test_store_processes.py). A SQLite file replaced or removed
under a kept store (a test's folder, a user starting over) is opened afresh on the next call.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from .store import RolloutStore


class KeptStore:
    """`await kept_store(location).call(lambda store: store.add_steps(...))`: `fn` runs on this
    store's one worker thread with the kept `RolloutStore`; its result or exception comes back."""

    def __init__(self, location: str) -> None:
        self.location = location
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rollout-store")
        self._store: RolloutStore | None = None
        self._file_id: tuple[int, int] | None = None

    def _file(self) -> tuple[int, int] | None:
        if self._store is None or self._store.postgres:
            return None
        try:
            info = os.stat(self._store.path)
        except OSError:
            return None
        return info.st_dev, info.st_ino

    def _open(self) -> RolloutStore:
        """The kept store (worker thread only); reopened when its SQLite file was replaced."""
        if self._store is not None and (self._store.postgres or self._file() == self._file_id):
            return self._store
        if self._store is not None:
            self._store.close()
        self._store = RolloutStore(self.location)
        self._file_id = self._file()
        return self._store

    def run[T](self, fn: Callable[[RolloutStore], T]) -> T:
        """`fn(store)` on the worker thread, waited for here (for code not on an event loop)."""
        return self._executor.submit(lambda: fn(self._open())).result()

    async def call[T](self, fn: Callable[[RolloutStore], T]) -> T:
        """`fn(store)` on the worker thread; the loop runs other episodes meanwhile. A caller
        cancelled while `fn` runs does not stop it: the transaction commits or rolls back whole."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(self._open()))

    def close(self) -> None:
        """Close the kept connection once the calls already queued are done; a later call
        fails. (Connections close anyway when the process ends; this is for evicted stores.)"""

        def close() -> None:
            if self._store is not None:
                self._store.close()

        self._executor.submit(close)
        self._executor.shutdown(wait=False)


#: Most locations one process keeps open: a coordinator writes one store; a test session or a
#: tool that touches many stores must not keep a thread and a connection for each.
MAX_KEPT = 8

_kept: OrderedDict[tuple[str, int], KeptStore] = OrderedDict()
_lock = threading.Lock()


def kept_store(location: str | os.PathLike[str]) -> KeptStore:
    """This process's `KeptStore` for `location` (a forked child gets its own); the least
    recently asked for of more than MAX_KEPT is closed."""
    key = (str(location), os.getpid())
    with _lock:
        kept = _kept.get(key)
        if kept is None:
            kept = _kept[key] = KeptStore(str(location))
            while len(_kept) > MAX_KEPT:
                _kept.popitem(last=False)[1].close()
        _kept.move_to_end(key)
        return kept
