"""Memory and process-count limits for a sandbox: cgroup v1 where this process may create groups.

Machines with cgroup v2 controllers delegated, or none at all, fall back to rlimits (applied by the
caller); `available()` says which, and `doctor` reports it.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from pydantic import BaseModel

ROOT = Path("/sys/fs/cgroup")


class CgroupSet(BaseModel):
    """The per-sandbox groups; a process joins them all by writing its pid to `procs_files`."""

    paths: list[Path]

    @property
    def procs_files(self) -> list[Path]:
        return [path / "cgroup.procs" for path in self.paths]


def _own_group(controller: str) -> Path | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controller in controllers.split(","):
                return ROOT / controller / path.lstrip("/")
    except OSError:
        return None
    return None


def available() -> dict[str, bool]:
    """Which v1 controllers we can create child groups under."""
    out = {}
    for controller in ("memory", "pids"):
        group = _own_group(controller)
        out[controller] = bool(group and group.is_dir() and os.access(group, os.W_OK))
    return out


def create(name: str, memory_mb: int | None, pids: int | None) -> CgroupSet:
    paths = []
    can = available()
    for controller, limit_file, value in (
        ("memory", "memory.limit_in_bytes", memory_mb * 1024 * 1024 if memory_mb else None),
        ("pids", "pids.max", pids),
    ):
        parent = _own_group(controller)
        if value is None or not can[controller] or parent is None:
            continue
        group = parent / name
        group.mkdir(exist_ok=True)
        (group / limit_file).write_text(str(value))
        if controller == "memory":
            # Count swap too where the kernel accounts it, so the limit cannot be sidestepped.
            swap = group / "memory.memsw.limit_in_bytes"
            if swap.exists():
                try:
                    swap.write_text(str(value))
                except OSError:
                    pass
        paths.append(group)
    return CgroupSet(paths=paths)


def destroy(groups: CgroupSet, wait_sec: float = 5) -> None:
    """Kill what is left in the groups and remove them."""
    deadline = time.monotonic() + wait_sec
    for group in groups.paths:
        while group.exists():
            try:
                for pid in (group / "cgroup.procs").read_text().split():
                    try:
                        os.kill(int(pid), 9)
                    except ProcessLookupError:
                        pass
                group.rmdir()
            except OSError:
                if time.monotonic() > deadline:
                    shutil.rmtree(group, ignore_errors=True)
                    break
                time.sleep(0.05)
