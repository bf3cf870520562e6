"""The rollout store with several real writer processes, and a writer killed mid-transaction,
on a SQLite file and on a real PostgreSQL server; two runs sharing one database stay apart."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from autoenvscaling.tools.rollouts.store import RolloutStore


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "shared.db")
    return request.getfixturevalue("postgres_url")


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


def test_concurrent_writer_processes_lose_no_rows(location):
    path = location
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


def test_killed_writer_leaves_every_committed_row(location):
    path = location
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

    if not path.startswith("postgresql://"):
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


# One run's process: its attempts, a search word of its own, and a re-recorded (resumed) attempt.
RUN_WRITER = textwrap.dedent(
    """
    import sys
    from autoenvscaling.tools.rollouts.models import Attempt, Step, stable_attempt_id
    from autoenvscaling.tools.rollouts.store import RolloutStore

    location, run_id = sys.argv[1], sys.argv[2]
    store = RolloutStore(location)
    for i in range(40):
        attempt = Attempt(id=stable_attempt_id(run_id, i), run_id=run_id, round=i % 3,
                          task_id=f"t{i % 5}", outcome="solved" if i % 2 else "failed",
                          reward=float(i % 2), policy_version=f"{run_id}-v0")
        store.record_attempt(attempt, [Step(index=0, tool_output=f"{run_id}word step {i}")])
        store.record_attempt(attempt)  # a resumed run records the same attempt again
    """
)


def test_two_runs_share_one_database_and_stay_apart(location):
    runs = ("run-a", "run-b")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RUN_WRITER, location, run_id],
            env=_env(),
            stderr=subprocess.PIPE,
            text=True,
        )
        for run_id in runs
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    store = RolloutStore(location)
    assert store.summary().attempts == 80 and store.summary().runs == 2
    for run_id in runs:
        mine = store.list_attempts(run_id=run_id, limit=1000)
        assert len(mine) == 40 and {a.run_id for a in mine} == {run_id}
        assert {a.policy_version for a in mine} == {f"{run_id}-v0"}
        rates = store.pass_rates(policy_version=f"{run_id}-v0")
        assert sum(r.attempts for r in rates) == 40 and sum(r.solved for r in rates) == 20
        hits = store.search(f"{run_id}word", limit=100)
        assert len(hits) == 40
        assert {store.get_attempt(h.attempt_id).run_id for h in hits} == {run_id}
