"""A child that watches its parent exits when the parent is SIGKILLed (server, GRPO worker)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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


def test_watched_child_exits_after_its_parent_is_killed(tmp_path):
    (tmp_path / "child.py").write_text(CHILD)
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
