"""The kept rollout store (tools/rollouts/kept.py) on real SQLite files and a real PostgreSQL
server: episodes on one event loop write through one kept connection, off the loop, and lose
nothing; a replaced file is reopened; a killed process keeps every committed row."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from autoenvscaling.tools.rollouts.kept import kept_store
from autoenvscaling.tools.rollouts.models import Step
from autoenvscaling.tools.rollouts.store import RolloutStore


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "rollouts.db")
    return request.getfixturevalue("postgres_url")


def _episode(i: int):
    def write(store: RolloutStore) -> str:
        attempt = store.start_attempt(id=f"a{i}", task_id=f"t{i % 5}")
        store.add_steps(attempt, [Step(index=j, tool_output=f"{i}:{j}") for j in range(6)])
        store.finish_attempt(attempt, reward=1.0, outcome="solved")
        return threading.current_thread().name

    return write


def test_episodes_in_flight_write_off_the_loop_and_lose_nothing(location):
    async def main() -> list[str]:
        kept = kept_store(location)
        assert kept is kept_store(location)  # one per location and process
        return await asyncio.gather(*(kept.call(_episode(i)) for i in range(200)))

    threads = asyncio.run(main())
    # Every write ran on the store's own worker thread, never on the loop's.
    assert set(threads) == {threads[0]} and threads[0].startswith("rollout-store")
    with RolloutStore(location) as other:  # a connection of its own sees every row
        rows = other.list_attempts(limit=1000)
        assert len(rows) == 200 and all(a.outcome == "solved" and a.turns == 6 for a in rows)
        steps = other.trajectory("a137").steps
        assert [s.tool_output for s in steps] == [f"137:{j}" for j in range(6)]


def test_add_steps_replaces_by_index_and_needs_the_attempt(location):
    with RolloutStore(location) as store:
        store.start_attempt(id="a", task_id="t")
        store.add_steps("a", [Step(index=0, tool_output="old"), Step(index=1, message="m")])
        stored = store.add_steps("a", [Step(attempt_id="ignored", index=0, tool_output="new")])
        assert stored[0].attempt_id == "a"
        assert [s.tool_output for s in store.trajectory("a").steps] == ["new", None]
        with pytest.raises(Exception, match="no attempt 'b'"):
            store.add_steps("b", [Step(index=0)])


def test_an_error_in_the_call_reaches_the_caller_and_commits_nothing(location):
    def half(store: RolloutStore) -> None:
        store.start_attempt(id="kept", task_id="t")
        with store._write() as conn:  # one transaction that fails midway
            conn.execute("DELETE FROM attempts WHERE id = 'kept'")
            raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        asyncio.run(kept_store(location).call(half))
    assert kept_store(location).run(lambda s: s.get_attempt("kept").task_id) == "t"


def test_a_replaced_sqlite_file_is_opened_afresh(tmp_path):
    path = tmp_path / "rollouts.db"
    kept = kept_store(path)
    kept.run(lambda s: s.start_attempt(id="first", task_id="t"))
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(f"{path}{suffix}"):
            os.remove(f"{path}{suffix}")
    kept.run(lambda s: s.start_attempt(id="second", task_id="t"))
    conn = sqlite3.connect(path)
    assert [r[0] for r in conn.execute("SELECT id FROM attempts")] == ["second"]
    conn.close()


KILLED = textwrap.dedent(
    """
    import asyncio, sys, time
    from autoenvscaling.tools.rollouts.kept import kept_store

    async def main():
        kept = kept_store(sys.argv[1])
        for i in range(30):
            await kept.call(lambda s, i=i: s.start_attempt(id=f"c{i}", task_id="t"))
            print(f"c{i}", flush=True)
        time.sleep(60)

    asyncio.run(main())
    """
)


def test_a_killed_process_keeps_every_committed_row(location):
    """The kept connection never closes before the kill: committed rows are in the WAL (or on
    the server), and the next open recovers them."""
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, location], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    printed = [proc.stdout.readline().strip() for _ in range(30)]
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    with RolloutStore(location) as store:
        assert {a.id for a in store.list_attempts(limit=100)} == set(printed)


def test_a_process_keeps_only_a_few_stores_open(tmp_path):
    from autoenvscaling.tools.rollouts.kept import MAX_KEPT

    first = kept_store(tmp_path / "0.db")
    first.run(lambda s: s.start_attempt(id="a", task_id="t"))
    others = [kept_store(tmp_path / f"{i}.db") for i in range(1, MAX_KEPT + 1)]
    for kept in others:
        kept.run(lambda s: s.start_attempt(id="a", task_id="t"))
    with pytest.raises(RuntimeError, match="shutdown"):
        first.run(lambda s: s.get_attempt("a"))  # evicted: its thread and connection are gone
    assert kept_store(tmp_path / "0.db") is not first  # asked again: a fresh one, same rows
    assert kept_store(tmp_path / "0.db").run(lambda s: s.get_attempt("a").task_id) == "t"
    # The evicted stores' threads end (each once its queued calls are done).
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _store_threads() > MAX_KEPT:
        time.sleep(0.05)
    assert _store_threads() <= MAX_KEPT


def _store_threads() -> int:
    return sum(t.name.startswith("rollout-store") for t in threading.enumerate())
