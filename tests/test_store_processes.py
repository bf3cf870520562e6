"""The rollout store with several real writer processes, and a writer killed mid-transaction."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

from autoenvscaling.tools.rollouts.store import RolloutStore

WRITER = textwrap.dedent(
    """
    import sys
    from autoenvscaling.tools.rollouts.models import Attempt, Step
    from autoenvscaling.tools.rollouts.store import RolloutStore

    path, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = RolloutStore(path)  # every writer migrates the fresh file at the same time
    for i in range(count):
        if i % 2:
            store.record_attempt(
                Attempt(id=f"{name}-{i}", task_id=f"t{i % 7}", outcome="failed", reward=0.0),
                [Step(index=j, tool_output=f"{name} {i} {j}") for j in range(3)],
            )
        else:
            attempt_id = store.start_attempt(id=f"{name}-{i}", task_id=f"t{i % 7}")
            for j in range(3):
                store.add_step(attempt_id, j, tool_output=f"{name} {i} {j}", exit_code=0)
            store.finish_attempt(attempt_id, reward=1.0, outcome="solved")
    """
)

# Commits attempts one by one (printing each id once committed), then opens a transaction that
# writes more rows and stalls inside it, so the parent can SIGKILL it mid-transaction.
KILLED_WRITER = textwrap.dedent(
    """
    import sys, time
    from autoenvscaling.tools.rollouts.models import Attempt, Step
    from autoenvscaling.tools.rollouts.store import RolloutStore

    store = RolloutStore(sys.argv[1])
    for i in range(20):
        store.record_attempt(Attempt(id=f"committed-{i}", task_id="t", outcome="solved"),
                             [Step(index=0, tool_output="x" * 5000)])
        print(f"committed-{i}", flush=True)

    def stalled():
        for i in range(200):
            yield Attempt(id=f"uncommitted-{i}", task_id="t"), [Step(index=0, tool_output="y" * 5000)]
        print("in-transaction", flush=True)
        time.sleep(60)

    store.record_attempts(stalled())
    """
)


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def test_concurrent_writer_processes_lose_no_rows(tmp_path):
    path = tmp_path / "shared.db"
    writers, per_writer = 4, 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), f"w{n}", str(per_writer)],
            env=_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err

    store = RolloutStore(path)
    summary = store.summary()
    assert summary.attempts == writers * per_writer
    assert summary.steps == writers * per_writer * 3
    assert summary.running == 0
    assert summary.by_outcome == {
        "solved": writers * per_writer // 2,
        "failed": writers * per_writer // 2,
    }
    # Every writer's every attempt is there, searchable.
    for n in range(writers):
        hits = store.search(f"w{n} {per_writer - 1} 2")
        assert [h.attempt_id for h in hits] == [f"w{n}-{per_writer - 1}"]


def test_killed_writer_leaves_every_committed_row(tmp_path):
    path = tmp_path / "killed.db"
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(path)],
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    committed = []
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip() == "in-transaction":
            break
        committed.append(line.strip())
    else:
        raise AssertionError(f"writer ended early: {proc.stderr.read() if proc.stderr else ''}")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    assert len(committed) == 20

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    store = RolloutStore(path)
    ids = {a.id for a in store.list_attempts(limit=1000)}
    assert ids == set(committed)
    assert store.summary().steps == 20
    # The dead writer's lock is gone: a new writer commits straight away.
    store.start_attempt(task_id="after", id="after-kill")
    assert store.get_attempt("after-kill").task_id == "after"
