"""Scratch folders that name their owner, so a crashed process's leftovers can be swept.

`make_scratch(prefix)` creates a temporary folder holding `.owner` (the pid and its start time,
which tells a live owner from a reused pid). `sweep_scratch(prefix)` removes the folders of that
prefix whose owner is gone: the trial folders of a `kill -9`ed gate, say. Folders without an owner
file are left alone (another program, or an older version, made them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["make_scratch", "process_start_time", "sweep_scratch"]

_OWNER = ".owner"


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22 of /proc/PID/stat)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[-1].split()[19]


def make_scratch(prefix: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    (folder / _OWNER).write_text(f"{os.getpid()} {process_start_time(os.getpid())}\n")
    return folder


def _alive(owner: Path) -> bool:
    try:
        pid_text, start = owner.read_text().split()
        pid = int(pid_text)
    except (OSError, ValueError):
        return True  # unreadable: not ours to judge
    return process_start_time(pid) == start


def sweep_scratch(prefix: str, root: Path | None = None) -> list[str]:
    """Remove `prefix*` folders under the temporary folder whose owner process has ended."""
    root = Path(root or tempfile.gettempdir())
    removed = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(prefix)]
    except OSError:
        return removed
    for folder in candidates:
        owner = folder / _OWNER
        if folder.is_symlink() or not owner.is_file() or _alive(owner):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder.name)
    return removed
