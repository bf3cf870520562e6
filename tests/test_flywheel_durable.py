"""A run killed with SIGKILL mid-round resumes with --resume: nothing lost, nothing duplicated."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.run_dir import RunDir
from autoenvscaling.tools.tasks.pool import Pool

from .conftest import FIXTURES, REPO
from .flywheel_policy import run_argv


def _cli(run_dir: Path, seed: Path, *extra: str) -> list[str]:
    return run_argv(
        run_dir,
        "--no-train",
        "--seed-dir",
        str(seed),
        "--proposals",
        "2",
        "--arm",
        "error_feedback",
        "--refresh-attempts",
        "2",
        "--solver-max-turns",
        "3",
        *extra,
    )


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HARBOR_TELEMETRY": "0"}


def _summary(run_dir: Path) -> dict:
    with RolloutStore(RunDir(run_dir).store) as store:  # rollouts.db, or store.json's URL
        attempts = store.list_attempts(limit=100_000)
        steps = {a.id: len(store.trajectory(a.id).steps) for a in attempts}
    verdicts = [
        json.loads(p.read_text()) for p in sorted((run_dir / "candidates").rglob("*.verdict.json"))
    ]
    pool = Pool(run_dir / "pool").entries()
    return {
        "attempts": Counter((a.role, a.round, a.metadata.get("purpose", "-")) for a in attempts),
        "unique_ids": len({a.id for a in attempts}) == len(attempts),
        "unfinished": [a.id for a in attempts if a.outcome is None],
        "proposer_rewards": sorted(
            (a.reward for a in attempts if a.role == "proposer"),
            key=lambda r: (r is None, r or 0.0),
        ),
        "proposer_steps": sorted(steps[a.id] for a in attempts if a.role == "proposer"),
        "verdicts": sorted((v["admitted"], v["stage"]) for v in verdicts),
        "pool": sorted(
            (e.source, e.category, e.status == "active" or e.retired_reason is not None)
            for e in pool
        ),
        "pool_dirs": sorted(
            p.name.startswith("r01-") for p in (run_dir / "pool").iterdir() if p.is_dir()
        ),
        "rounds_reported": [
            m["round"] for m in json.loads((run_dir / "reports/metrics.json").read_text())
        ],
    }


@pytest.fixture(scope="module")
def reference(engine_ready, tmp_path_factory) -> tuple[Path, Path, dict]:
    """(seed folder, run folder, summary) of one uninterrupted one-round run."""
    root = tmp_path_factory.mktemp("durable")
    seed = root / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    run = root / "reference"
    done = subprocess.run(
        _cli(run, seed), env=_env(), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return seed, run, _summary(run)


def _steps_saved(graph_db: Path) -> int:
    """Step checkpoints of the flywheel graph itself (not of anything nested) on disk."""
    if not graph_db.exists():
        return 0
    conn = sqlite3.connect(f"file:{graph_db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT count(*) FROM checkpoints WHERE checkpoint_ns = ''").fetchone()[
            0
        ]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0
    finally:
        conn.close()


def _run_until(
    cmd: list[str],
    *,
    seconds: float | None = None,
    appears: Path | None = None,
    steps_in: Path | None = None,
    then: float = 0.0,
) -> int:
    """Run the CLI; SIGKILL it after `seconds`, as soon as the file `appears` exists, or `then`
    seconds after it saved one more step checkpoint in the graph database `steps_in`.

    Returns its exit status (-9 when killed). Waiting for a saved step makes every killed resume
    move at least one node boundary further; the varying `then` lands the kill at different
    points of the next step (before its first task ends, between parallel tasks, mid-node).
    A printed node update is not such a boundary: LangGraph saves a finished task's writes in
    the background, so a kill right after the line may lose them, and a resume prints the
    updates it replays from the checkpoint again.
    """
    proc = subprocess.Popen(
        cmd,
        env=_env(),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    saved = _steps_saved(steps_in) if steps_in is not None else 0
    deadline = time.monotonic() + (seconds if seconds is not None else 600)
    while time.monotonic() < deadline and proc.poll() is None:
        if appears is not None and appears.exists():
            break
        if steps_in is not None and _steps_saved(steps_in) > saved:
            time.sleep(then)
            break
        time.sleep(0.002 if steps_in is None else 0.005)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    return proc.returncode


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_kill_at_every_node_boundary_and_in_the_first_second(reference, tmp_path):
    """A chain of runs, each SIGKILLed at a point the test picks, ends like an uninterrupted run.

    The first two kills land inside the first second: while the CLI starts, and the instant
    graph.sqlite appears (before its first checkpoint). Then every resume is killed 0 or 0.1
    seconds after it saved its next step checkpoint, so each one moves at least one node boundary
    further until a run finishes on its own. Nothing may be
    lost, duplicated or left behind (attempts, verdicts, pool, reports, half-copied folders).
    """
    seed, _, expected = reference
    killed = tmp_path / "killed"
    assert _run_until(_cli(killed, seed), seconds=0.5) == -signal.SIGKILL
    assert _run_until(_cli(killed, seed), appears=killed / "graph.sqlite") == -signal.SIGKILL
    assert (killed / "graph.sqlite").exists()
    kills = 0
    while True:
        status = _run_until(
            _cli(killed, seed, "--resume"),
            steps_in=killed / "graph.sqlite",
            then=(0.0, 0.0, 0.1)[kills % 3],
        )
        if status == 0:
            break
        assert status == -signal.SIGKILL, f"the resumed run failed with {status}"
        kills += 1
        assert kills < 30, "the resumes make no progress"
    print(f"{kills} kills mid-run")
    assert kills >= 4, f"only {kills} kills landed mid-run"

    actual = _summary(killed)
    infra = [
        v["reason"]
        for p in sorted((killed / "candidates").rglob("*.verdict.json"))
        if (v := json.loads(p.read_text()))["infrastructure_error"]
    ]
    # An engine that fails to start under load is not a durability bug; say which it was.
    assert not infra, f"the engine failed during the chain (not a resume bug): {infra}"
    assert actual["unique_ids"] and not actual["unfinished"]
    assert actual == expected
    leftovers = [p.name for p in (killed / "pool").iterdir() if p.name.endswith(".tmp")]
    assert not leftovers


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_finished_run_continues_with_more_rounds(reference):
    seed, run, _ = reference
    again = subprocess.run(
        _cli(run, seed, "--resume"), env=_env(), cwd=REPO, capture_output=True, text=True
    )
    assert again.returncode == 0 and "already finished 1 round" in " ".join(again.stderr.split())
    more = subprocess.run(
        _cli(run, seed, "--resume", "--rounds", "2"),
        env=_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert more.returncode == 0, more.stderr[-3000:]
    assert "continuing with rounds 2..2" in " ".join(more.stderr.split())
    assert _summary(run)["rounds_reported"] == [1, 2]
