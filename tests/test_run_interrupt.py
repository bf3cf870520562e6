"""Ctrl-C stops a run cleanly: one SIGINT mid-round ends the command with 130 and a resume
line, before the next round starts (it was a bare traceback). Real: the
CLI in its own process, podman sandboxes, the rollout store; scripted: the policy's replies."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from autoenvscaling.cli.exit_codes import ExitCode
from autoenvscaling.tools.rollouts.store import RolloutStore

from .conftest import FIXTURES, REPO
from .flywheel_policy import run_argv


def _attempts(store: Path) -> list:
    if not store.exists():
        return []
    with RolloutStore(store) as rollouts:
        return rollouts.list_attempts(limit=10_000)


@pytest.mark.timeout(600)
def test_one_sigint_stops_the_run_before_its_next_round(engine_ready, tmp_path: Path):
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    run_dir = tmp_path / "run"
    argv = run_argv(
        run_dir,
        "--rounds",
        "3",
        "--no-train",
        "--seed-dir",
        str(seed),
        "--proposals",
        "0",
        "--refresh-attempts",
        "2",
        "--solver-max-turns",
        "3",
    )
    env = {**os.environ, "PYTHONPATH": str(REPO), "HARBOR_TELEMETRY": "0"}
    # SIGINT as a terminal delivers it: a test runner started in the background (`cmd &` in a
    # non-interactive shell) passes SIGINT on ignored, and Python then never raises
    # KeyboardInterrupt; the child starts with the default disposition, as under a terminal.
    proc = subprocess.Popen(
        argv,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    store = run_dir / "rollouts.db"
    deadline = time.monotonic() + 300
    # Interrupt while round 1's first attempt is in flight (recorded, not finished).
    while not any(a.outcome is None for a in _attempts(store)):
        assert proc.poll() is None, proc.communicate()[0].decode()[-3000:]
        assert time.monotonic() < deadline, "no attempt started"
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    try:
        output = proc.communicate(timeout=240)[0].decode()
    except subprocess.TimeoutExpired:
        proc.kill()
        output = proc.communicate()[0].decode()
        pytest.fail(f"one SIGINT did not stop the run within 240 s:\n{output[-3000:]}")
    assert proc.returncode == ExitCode.INTERRUPTED, output[-3000:]
    assert "the run stopped: interrupted" in output and "--resume" in output, output[-3000:]
    rounds = {a.round for a in _attempts(store)}
    assert rounds and max(rounds) <= 1, rounds  # round 2 never started
