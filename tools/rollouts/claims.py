"""Attempts shared by several coordinators on one PostgreSQL store: each attempt runs once.

A coordinator takes an attempt by PostgreSQL's session-level advisory lock on the attempt's id
(`pg_try_advisory_lock`), held on its kept store connection (kept.py) while the attempt runs, and
given back when it ends. An attempt whose row is finished (it has an outcome) is read, never run
again; one whose lock another session holds is waited for. A killed coordinator's connection ends
with it and so does its lock: the attempt is free again, and whoever asks next runs it (its
half-written rows are replaced, the store's writes being upserts on the attempt's id).

The lock is the database's own (no scheduler of ours, no lease to expire, no clock to trust).
On SQLite, one coordinator per file, there is nothing to share: the attempt just runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Literal

from .kept import kept_store
from .models import Attempt, AttemptNotFoundError
from .postgres import is_postgres_url
from .store import RolloutStore

#: How often a coordinator asks again about an attempt another one is running.
POLL_SEC = 1.0

# Advisory locks are re-entrant within a session: two coroutines of one process must not both
# take the same attempt through the one kept connection.
_held: set[tuple[str, str]] = set()
_held_lock = threading.Lock()


def _finished(store: RolloutStore, attempt_id: str) -> Attempt | None:
    try:
        attempt = store.get_attempt(attempt_id)
    except AttemptNotFoundError:
        return None
    return attempt if attempt.outcome is not None else None


def _take(store: RolloutStore, attempt_id: str) -> Attempt | Literal["taken", "busy"]:
    """On the kept store's thread: the finished attempt, or "taken" (this session now holds its
    lock), or "busy" (another session holds it)."""
    if (done := _finished(store, attempt_id)) is not None:
        return done
    key = (store.location, attempt_id)
    with _held_lock:
        if key in _held:
            return "busy"
        if not store.try_session_lock(attempt_id):
            return "busy"
        _held.add(key)
    # Finished by another session between the first read and the lock: nothing left to run.
    if (done := _finished(store, attempt_id)) is not None:
        _release(store, attempt_id)
        return done
    return "taken"


def _release(store: RolloutStore, attempt_id: str) -> None:
    with _held_lock:
        store.release_session_lock(attempt_id)
        _held.discard((store.location, attempt_id))


async def run_once[T](
    location: str,
    attempt_id: str,
    run: Callable[[], Awaitable[T]],
    stored: Callable[[Attempt], T],
    *,
    slot: asyncio.Semaphore | None = None,
    poll_sec: float = POLL_SEC,
) -> T:
    """`await run()` unless another coordinator on the store runs or ran `attempt_id`; then
    `stored(row)` of its finished row (waiting while it runs; taking it over if its coordinator
    dies first). `run` must finish the attempt's row in the store before it returns.

    `slot`: the caller's concurrency limit, held while taking and running, given back while
    another coordinator runs the attempt. Held through that wait, two coordinators walking the
    same list in the same order left the second one's slots all waiting on the first one's
    attempts: it ran none of the round (tests/test_claims.py)."""
    limit = slot if slot is not None else contextlib.nullcontext()
    if not is_postgres_url(location):
        async with limit:
            return await run()
    while True:
        async with limit:
            kept = kept_store(location)  # lock and release on the same kept connection
            state = await kept.call(lambda store: _take(store, attempt_id))
            if isinstance(state, Attempt):
                return stored(state)
            if state == "taken":
                try:
                    return await run()
                finally:
                    await asyncio.shield(kept.call(lambda store: _release(store, attempt_id)))
        await asyncio.sleep(poll_sec)  # busy elsewhere: wait without a slot
