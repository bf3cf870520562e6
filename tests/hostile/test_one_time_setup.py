"""The guard of tests/one_time_setup.py: a one-time build inside a test's time fails that test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ..conftest import REPO

INNER = """
import os
from pathlib import Path

def test_builds_inside_its_time():
    Path(os.environ["MARKER"]).write_text("built")

def test_builds_nothing():
    assert True
"""


@pytest.mark.timeout(120)
def test_a_build_inside_a_test_fails_that_test(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    marker = tmp_path / "cache" / "base.ready"
    marker.parent.mkdir()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "MARKER": str(marker),
        "AUTOENVSCALING_ONE_TIME_MARKERS": str(marker),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "tests.one_time_setup",
            "-p",
            "no:cacheprovider",
            "-c",
            os.devnull,
            "--rootdir",
            str(tmp_path),
            "test_inner.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=100,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    assert "ERROR test_inner.py::test_builds_inside_its_time" in out, out[-3000:]
    assert "test_builds_nothing" not in out.split("short test summary")[-1]
    assert "one-time set-up ran inside this test's time" in out and "base.ready" in out
