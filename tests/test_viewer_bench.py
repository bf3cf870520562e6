"""Issue #31's budget: the viewer serves the overview of a run of 1,000 attempts and 200
candidates in under 300 ms (benchmarks/bench_viewer.py, over loopback HTTP)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_the_overview_of_a_large_run_is_served_in_under_300_ms(tmp_path):
    out = tmp_path / "bench.json"
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "bench_viewer.py"), "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=280,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(out.read_text())
    assert (result["attempts"], result["candidates"]) == (1000, 200)
    assert result["overview_median_ms"] < 300, result
