"""The hostile corpus through a real flywheel round: proposers (scripted replies, real terminal)
recreate every case in their candidate folder and submit it. The run must finish, judge every
candidate as the task's fault (reward -1, no infrastructure error), admit none of them, and agree
between the rollout store and the candidate records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.pool import Pool

from ..conftest import FIXTURES, REPO
from .corpus import GATE_ENV
from .hostile_policy import FLYWHEEL_CASES, POLICY


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_hostile_corpus_never_crashes_a_flywheel_round(engine_ready, tmp_path):
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    run = tmp_path / "run"
    command = [
        sys.executable, "-m", "tests.hostile.hostile_policy", "autoenvscaling.cli.main", "run",
        "--run-dir", str(run), "--model", POLICY, "--no-train", "--no-calibrate",
        "--seed-dir", str(seed), "--proposals", str(len(FLYWHEEL_CASES)), "--arm", "terminal",
        "--refresh-attempts", "1", "--solver-max-turns", "1", "--proposer-max-turns", "12",
    ]  # fmt: skip
    env = {**os.environ, **GATE_ENV, "PYTHONPATH": str(REPO), "HARBOR_TELEMETRY": "0"}
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=800)
    assert done.returncode == 0, done.stderr[-4000:]

    metrics = json.loads((run / "reports" / "metrics.json").read_text())
    assert metrics[0]["admitted"] == 0
    assert [e.task_id for e in Pool(run / "pool").entries()] == ["word-count"]
    with RolloutStore(run / "rollouts.db") as store:
        proposers = [a for a in store.list_attempts(role="proposer", limit=1000)]
    assert len(proposers) == len(FLYWHEEL_CASES)
    assert all(a.outcome is not None for a in proposers)
    wrong = [(a.task_id, a.reward, a.error) for a in proposers if a.reward != -1.0]
    assert not wrong, wrong
    verdicts = [json.loads(p.read_text()) for p in (run / "candidates").rglob("*.verdict.json")]
    assert len(verdicts) == len(FLYWHEEL_CASES)
    assert not [v for v in verdicts if v["admitted"] or v["infrastructure_error"]]
    stages = sorted({v["stage"] for v in verdicts})
    assert stages == ["lint", "nop", "oracle"], stages
