"""The GPU check script runs end to end on CPU (tiny shape): a smoke test, not a measurement."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]


def test_gpu_train_script_smoke_on_cpu(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "gpu_train.py"),
            "--device",
            "cpu",
            "--steps",
            "2",
            "--num-generations",
            "4",
            "--prompts-per-step",
            "2",
            "--max-completion-length",
            "48",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["steps"] == 2 and report["params_changed"] > 0
    assert report["tokens_per_sec"] > 0 and report["peak_rss_gib"] > 0
