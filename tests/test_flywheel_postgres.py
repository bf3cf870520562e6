"""A whole flywheel round on PostgreSQL (`run --store URL`): killed with SIGKILL after its first
step checkpoints, resumed by another process that finds the database through the run folder's
store.json, it ends as the uninterrupted SQLite run (tests/test_flywheel_durable.py) ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from .test_flywheel_durable import REPO, _cli, _env, _run_until, _summary, reference  # noqa: F401

psycopg = pytest.importorskip("psycopg", reason="the postgres extra is not installed")


def _steps_saved(url: str, thread: str) -> int:
    """The flywheel graph's own step checkpoints of `thread` in the database (0 before setup)."""
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('checkpoints')").fetchone() in (None, (None,)):
            return 0
        row = conn.execute(
            "SELECT count(*) FROM checkpoints WHERE checkpoint_ns = '' AND thread_id = %s",
            (thread,),
        ).fetchone()
        return int(row[0]) if row else 0


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_round_on_postgres_killed_and_resumed_elsewhere(reference, postgres_url, tmp_path):  # noqa: F811
    seed, _, expected = reference
    run = tmp_path / "on-postgres"
    thread = f"flywheel:{run.name}"
    proc = subprocess.Popen(
        _cli(run, seed, "--store", postgres_url),
        env=_env(),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 600
    while _steps_saved(postgres_url, thread) < 3 and proc.poll() is None:
        assert time.monotonic() < deadline, "no checkpoint reached PostgreSQL"
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert json.loads((run / "store.json").read_text())["url"] == postgres_url
    assert not (run / "graph.sqlite").exists() and not (run / "rollouts.db").exists()

    # Another process, given only the folder: store.json names the database.
    assert _run_until(_cli(run, seed, "--resume")) == 0
    actual = _summary(run)
    assert actual["unique_ids"] and not actual["unfinished"]
    assert actual == expected
    assert not (run / "graph.sqlite").exists() and not (run / "rollouts.db").exists()
