"""A run killed with SIGKILL mid-round resumes with --resume: nothing lost, nothing duplicated."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from autoenvscaling.tools.pool import Pool
from autoenvscaling.tools.rollout_store import RolloutStore

from .conftest import FIXTURES, REPO

POLICY = "scripted:py:tests.flywheel_policy:shared_policy"


def _cli(run_dir: Path, seed: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "autoenvscaling.cli.main",
        "run",
        "--run-dir",
        str(run_dir),
        "--model",
        POLICY,
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
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "HARBOR_TELEMETRY": "0"}


def _summary(run_dir: Path) -> dict:
    with RolloutStore(run_dir / "rollouts.db") as store:
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
        "proposer_rewards": sorted(a.reward for a in attempts if a.role == "proposer"),
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


@pytest.mark.slow
def test_sigkill_mid_round_then_resume_matches_an_uninterrupted_run(engine_ready, tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")

    reference = tmp_path / "reference"
    done = subprocess.run(
        _cli(reference, seed), env=_env(), cwd=REPO, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]

    killed = tmp_path / "killed"
    proc = subprocess.Popen(
        _cli(killed, seed),
        env=_env(),
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not list((killed / "candidates").rglob("*.verdict.json")):
        assert proc.poll() is None, "the run finished before it could be killed"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # mid-round: one verdict in, the other proposal pending
    proc.wait()
    assert not (killed / "reports" / "metrics.json").exists()

    resumed = subprocess.run(
        _cli(killed, seed, "--resume"),
        env=_env(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    expected, actual = _summary(reference), _summary(killed)
    assert actual["unique_ids"] and not actual["unfinished"]
    assert actual == expected
