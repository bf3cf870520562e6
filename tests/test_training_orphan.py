"""A child that watches its parent exits when the parent is SIGKILLed (server, GRPO worker)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CHILD = """
import os, sys, time
from autoenvscaling.training.orphan import watch_parent
watch_parent(os.getppid(), lambda: None, interval_sec=0.05, grace_sec=0)
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(600)
"""
PARENT = """
import subprocess, sys, time
subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2]])
time.sleep(600)
"""


# The worker's last words go to the dead parent's stdout pipe: they raise BrokenPipeError.
CHILD_REPORTING = CHILD.replace(
    "lambda: None", "lambda: (_ for _ in ()).throw(BrokenPipeError(32, 'Broken pipe'))"
)


@pytest.mark.parametrize("child", [CHILD, CHILD_REPORTING], ids=["quiet", "report-fails"])
def test_watched_child_exits_after_its_parent_is_killed(tmp_path, child):
    (tmp_path / "child.py").write_text(child)
    (tmp_path / "parent.py").write_text(PARENT)
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py"), str(tmp_path / "child.py"), str(pid_file)]
    )
    for _ in range(400):  # the child is watching once it wrote its pid
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    for _ in range(200):
        stat = Path(f"/proc/{child}/stat")
        if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return
        time.sleep(0.05)
    os.kill(child, signal.SIGKILL)
    raise AssertionError("the watched child outlived its killed parent")


# A rank under `accelerate launch`: its parent is the launcher, which lives on; it watches the
# training parent above the launcher by pid (training/worker_protocol.py, PARENT_PID_ENV).
RANK = """
import os, sys, time
from autoenvscaling.training.orphan import watch_process
watch_process(int(sys.argv[2]), lambda: None, interval_sec=0.05, grace_sec=0)
open(sys.argv[1], "w").write(str(os.getpid()))
time.sleep(600)
"""
LAUNCHER = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2], sys.argv[3]])
time.sleep(600)
"""
TRAINING_PARENT = """
import os, subprocess, sys, time
subprocess.Popen([sys.executable, sys.argv[1], sys.argv[2], sys.argv[3], str(os.getpid())])
time.sleep(600)
"""


def test_a_rank_exits_after_the_training_parent_is_killed_while_its_launcher_lives(tmp_path):
    for name, text in (("rank", RANK), ("launcher", LAUNCHER), ("parent", TRAINING_PARENT)):
        (tmp_path / f"{name}.py").write_text(text)
    pid_file = tmp_path / "rank.pid"
    parent = subprocess.Popen(
        [sys.executable, *(str(tmp_path / f"{n}.py") for n in ("parent", "launcher", "rank"))]
        + [str(pid_file)]
    )
    for _ in range(400):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.05)
    rank = int(pid_file.read_text())
    launcher = int(Path(f"/proc/{rank}/stat").read_text().rsplit(")", 1)[1].split()[1])
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    try:
        for _ in range(200):
            stat = Path(f"/proc/{rank}/stat")
            if not stat.exists() or stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
                assert Path(f"/proc/{launcher}").exists()  # it was the watch, not the launcher
                return
            time.sleep(0.05)
        os.kill(rank, signal.SIGKILL)
        raise AssertionError("the rank outlived the killed training parent")
    finally:
        os.kill(launcher, signal.SIGKILL)
