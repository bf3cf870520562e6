"""The guard of tests/one_time_setup.py: a one-time build inside a test's time fails that test,
and a build by another process on the machine during that test blames no test."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from autoenvscaling.tools.one_time import ONE_TIME_LOG_ENV

from ..conftest import REPO

INNER = """
import os
import time
from pathlib import Path

from autoenvscaling.tools.one_time import record_one_time_build


def test_builds_inside_its_time():
    marker = Path(os.environ["MARKER"])
    marker.write_text("built")
    record_one_time_build(f"the base root filesystem ({marker})")


def test_builds_in_a_child_process():
    import subprocess, sys
    code = "from autoenvscaling.tools.one_time import record_one_time_build as r; r('the cold start (child)')"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_builds_nothing():
    assert True


def test_another_process_builds_meanwhile():
    Path(os.environ["STARTED"]).write_text("go")
    other = Path(os.environ["OTHER_MARKER"])
    deadline = time.monotonic() + 60
    while not other.exists():
        assert time.monotonic() < deadline, "the other process never built"
        time.sleep(0.1)
"""

#: What a `make run` beside the suite does: a real one-time build's record, from a process that
#: no test started (its environment names no test's log).
OTHER = """
import os, sys, time
from pathlib import Path
from autoenvscaling.tools.one_time import record_one_time_build

started = Path(os.environ["STARTED"])
deadline = time.monotonic() + 60
while not started.exists() and time.monotonic() < deadline:
    time.sleep(0.1)
marker = Path(os.environ["OTHER_MARKER"])
marker.write_text("built by another process")
record_one_time_build(f"the cold start ({marker})")
"""


@pytest.mark.timeout(180)
def test_only_builds_a_test_ran_fail_that_test(tmp_path):
    (tmp_path / "test_inner.py").write_text(INNER)
    cache = tmp_path / "cache"
    cache.mkdir()
    env = {k: v for k, v in os.environ.items() if k != ONE_TIME_LOG_ENV}
    env |= {
        "PYTHONPATH": str(REPO),
        "MARKER": str(cache / "base.ready"),
        "OTHER_MARKER": str(cache / "cold-start"),
        "STARTED": str(tmp_path / "started"),
    }
    other = subprocess.Popen([sys.executable, "-c", OTHER], env=env)
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "-q",
                "-rA",
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
            timeout=150,
        )
    finally:
        other.wait(timeout=70)
    out = done.stdout + done.stderr
    summary = out.split("short test summary")[-1]
    assert done.returncode == 1, out[-3000:]
    assert "ERROR test_inner.py::test_builds_inside_its_time" in summary, out[-3000:]
    assert "ERROR test_inner.py::test_builds_in_a_child_process" in summary, out[-3000:]
    assert "PASSED test_inner.py::test_builds_nothing" in summary, out[-3000:]
    assert "PASSED test_inner.py::test_another_process_builds_meanwhile" in summary, out[-3000:]
    assert (cache / "cold-start").is_file()  # the other process did build during the suite
    assert "one-time set-up ran inside this test's time" in out and "base.ready" in out
    assert "the cold start (child)" in out
