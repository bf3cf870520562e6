"""A measured cap on a container's writable layer, where it cannot have a filesystem of its own.

The layer is normally on an ext4 of its cap (layerfs.py). Where that cannot be made (a remote
engine, not root), one watcher thread per process measures the upper directory of every sandbox
this process owns (allocated blocks, so a sparse file counts for what it really uses, and entries)
every `INTERVAL_SEC` and kills a container that is over its `disk_mb` or over one file per
`BYTES_PER_INODE` of it. The window is what a sandbox writes in one interval: fallocate (which
reserves any size at once) is refused in sandboxes (profile.py), so bytes grow only as fast as
they are written. /logs is a size-capped tmpfs (profile.py), outside this measure. `mechanism()`
says which applies here (for `doctor`).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from . import layerfs
from .base import Backend
from .engine import client
from .layerfs import BYTES_PER_INODE, upper_dir

if TYPE_CHECKING:
    from .container import ContainerSandbox

INTERVAL_SEC = 1.0

_WATCHED: weakref.WeakSet[ContainerSandbox] = weakref.WeakSet()
_LOCK = threading.Lock()
_THREAD: threading.Thread | None = None


#: A layer of `disk_mb` may hold one file per this many bytes (ext4's default inode ratio):
#: 300,000 empty files in a 64 MB layer are as much a flood as 64 MB of data.


def usage(
    root: Path, stop_bytes: int | None = None, stop_inodes: int | None = None
) -> tuple[int, int]:
    """(bytes allocated (st_blocks), entries) under `root`, without following links; stops as
    soon as either passes its stop."""
    total = inodes = 0
    stack = [str(root)]
    while stack:
        folder = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_blocks * 512
                inodes += 1
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
        if (stop_bytes is not None and total > stop_bytes) or (
            stop_inodes is not None and inodes > stop_inodes
        ):
            break
    return total, inodes


def mechanism(backend: Backend = "podman") -> str:
    """Which writable-layer cap applies on this machine's engine (for `doctor`)."""
    info = client(backend).api.info()
    status = dict(info.get("DriverStatus") or [])
    driver, backing = info.get("Driver", "?"), status.get("Backing Filesystem", "?")
    measured = (
        f"measured: each sandbox's upper dir is measured every {INTERVAL_SEC:g} s and the "
        "container killed at its cap (disk_mb, task.toml storage_mb)"
    )
    if driver == "overlay" and os.geteuid() == 0 and Path(layerfs.MKFS).exists():
        return (
            f"{driver} on {backing}: each sandbox's layer is an ext4 of its cap on a loop device "
            "(writes past it fail with ENOSPC), mounted outside the engine's overlay home and "
            f"held by the container's overlay alone; where one cannot be made, {measured}"
        )
    return f"{measured} ({driver} on {backing}: no loop filesystem without root and overlay)"


def watch(sandbox: ContainerSandbox) -> None:
    """Start measuring this sandbox's writable layer (the sandbox's owner calls it)."""
    if not sandbox.ref.limits.disk_mb:
        return
    with _LOCK:
        _WATCHED.add(sandbox)
        global _THREAD
        if _THREAD is None or not _THREAD.is_alive():
            _THREAD = threading.Thread(target=_loop, name="aes-layer-cap", daemon=True)
            _THREAD.start()


def _loop() -> None:
    uppers: dict[str, Path | None] = {}
    while True:
        time.sleep(INTERVAL_SEC)
        with _LOCK:
            boxes = [b for b in _WATCHED if not b._closed]
        for box in boxes:
            try:
                check(box, uppers)
            except Exception:  # noqa: BLE001, S112 - one bad container must not stop the watch
                continue


def check(box: ContainerSandbox, uppers: dict[str, Path | None] | None = None) -> bool:
    """Measure one sandbox now; kill it if it is over its cap. True when it was killed."""
    uppers = {} if uppers is None else uppers
    cid = box.container_id
    if cid not in uppers:
        uppers[cid] = upper_dir(box._api, cid)
    upper = uppers[cid]
    cap = (box.ref.limits.disk_mb or 0) * 1024 * 1024
    if upper is None or not cap:
        return False
    files = cap // BYTES_PER_INODE
    used, inodes = usage(upper, stop_bytes=cap, stop_inodes=files)
    if used <= cap and inodes <= files:
        return False
    box.ref.handle["killed"] = (
        f"the writable layer went over its {box.ref.limits.disk_mb} MB cap (disk_mb)"
        if used > cap
        else f"the writable layer went over its {files} files cap (one per "
        f"{BYTES_PER_INODE // 1024} KB of disk_mb={box.ref.limits.disk_mb})"
    )
    try:
        box._api.kill(cid)
    except Exception:  # noqa: BLE001 - already gone
        pass
    return True
