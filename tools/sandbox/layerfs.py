"""The writable layer on a filesystem of its own: a cap the kernel enforces, with no window.

Quotas cannot do it here: `--storage-opt size=` needs XFS project quotas, and this kind of host's
kernel has no quota support at all (XFS: "quota support not available in this kernel"; ext4:
"not built with CONFIG_QUOTA"). So before a container starts, its writable layer (`diff` and
`work`: upper and work must share one mount) is moved onto a journal-less ext4 of `disk_mb` with
one inode per `BYTES_PER_INODE`, on a loop device. A write or a file past the cap fails at once
with ENOSPC, and `df /` in the sandbox shows its real size.

Where the filesystem is mounted is what keeps the engine alive (issue 38). Never inside the
engine's overlay home: every podman process bind-mounts that home onto itself when it is not a
mountpoint, and lazily unmounts it when it exits with no layer mounted (containers/storage's
`MakePrivate` and `Cleanup`). A loop mount made on a layer folder while the bind was away was
hidden by the next process's bind: the container's removal then failed with EBUSY, its layer
stayed "incomplete", and every later podman process retried deleting it while holding the
storage lock; one made under the bind was detached with it when a process exited (the cap gone).
So the filesystem is mounted in a folder of ours beside the store (`BACKING_FOLDER`), the layer's
`diff` and `work` become links into it, and once the container runs (`release`) the mount is
lazily detached: the container's overlay holds its own reference to the filesystem, which goes,
and its loop device (auto-clear) with it, when the engine unmounts the overlay at the container's
end. Between `confine` and `release` the mount is in our folder, where no engine bind reaches;
a process that died in that window leaves one, removed by the next `confine` (its owner is dead).

Where this cannot be done (a remote engine, not root, no loop device), `confine` says why and the
measured cap (layercap.py) applies instead.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

from . import cleanup

MKFS = "/usr/sbin/mkfs.ext4"
MOUNT = "/usr/bin/mount"
FIXED_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
#: Beside the engine's store (not in its overlay home), so the layer's bytes land on the same
#: disk as before and no engine bind mount can cover the filesystem.
BACKING_FOLDER = "aes-layers"
#: What moves onto the layer's own filesystem: overlayfs wants upper and work on one mount.
MOVED = ("diff", "work")
MNT_DETACH = 2
#: One inode per this many bytes of the cap (mkfs -i): a layer cannot run out of inodes first.
BYTES_PER_INODE = 16_384


def upper_dir(api: Any, container_id: str) -> Path | None:
    """The container's writable layer on this host, or None (remote engine, other driver)."""
    try:
        data = api.inspect_container(container_id).get("GraphDriver", {}).get("Data") or {}
    except Exception:  # noqa: BLE001 - gone already
        return None
    upper = data.get("UpperDir")
    # A link: the layer is on its own filesystem (layerfs.py), detached once the container runs.
    return Path(upper) if upper and (Path(upper).is_dir() or Path(upper).is_symlink()) else None


_LIBC = ctypes.CDLL(None, use_errno=True)
#: This process's mounts between `confine` and `release`, by container id.
_MOUNTED: dict[str, Path] = {}
_LOCK = threading.Lock()


class NotConfinedError(Exception):
    """The layer stays where the engine put it; the message says why."""


def confine(api: Any, container_id: str, disk_mb: int) -> str:
    """Move a created (not yet started) container's writable layer onto a filesystem of
    `disk_mb`. Returns what now holds it; raises NotConfinedError with the reason otherwise.
    Call `release` once the container has started (or failed to)."""
    if os.geteuid() != 0:
        raise NotConfinedError("not root: no loop mount")
    upper = upper_dir(api, container_id)
    if upper is None or upper.name != "diff" or not (upper.parent / "link").is_file():
        raise NotConfinedError("no local overlay layer (a remote engine or another driver)")
    layer = upper.parent
    folder = layer.parent.parent / BACKING_FOLDER
    name = f"{cleanup.owner()}-{container_id[:12]}"
    backing, target = folder / f"{name}.img", folder / name
    mounted = False
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        _remove_leftovers(folder)
        with open(backing, "xb") as handle:
            os.truncate(handle.fileno(), disk_mb * 1024 * 1024)
        _run(
            MKFS, "-q", "-F", "-m", "0", "-O", "^has_journal",
            "-N", str(max(disk_mb * 1024 * 1024 // BYTES_PER_INODE, 1024)),
            "-E", "lazy_itable_init=1,nodiscard", "-d", str(upper.parent), str(backing),
        )  # fmt: skip
        target.mkdir(mode=0o700)
        # noinit_itable: the backing file reads as zeros, nothing to zero in the background.
        options = "loop,nosuid,nodev,noinit_itable"
        _run(MOUNT, "-t", "ext4", "-o", options, str(backing), str(target), tries=3)
        mounted = True
        for part in MOVED:
            _link(layer / part, target / part)
        with _LOCK:
            _MOUNTED[container_id] = target
    except (OSError, subprocess.SubprocessError, NotConfinedError) as exc:
        if mounted:
            _restore(layer)
            _detach(target)
        _rmdir(target)
        raise NotConfinedError(f"loop filesystem not made: {exc}") from exc
    finally:
        backing.unlink(missing_ok=True)
    return f"ext4 of {disk_mb} MB on a loop device"


def release(container_id: str) -> None:
    """Detach our mount of this container's layer filesystem, now that its overlay holds it (or
    the container is gone). Idempotent; a container this process never confined is left alone."""
    with _LOCK:
        target = _MOUNTED.pop(container_id, None)
    if target is not None:
        _detach(target)
        _rmdir(target)


def _link(inside_layer: Path, on_own_fs: Path) -> None:
    """Replace the engine's folder by a link to its copy on the layer's own filesystem."""
    old = inside_layer.with_name(f".aes-old-{inside_layer.name}")
    inside_layer.rename(old)
    os.symlink(on_own_fs, inside_layer)
    shutil.rmtree(old, ignore_errors=True)


def _restore(layer: Path) -> None:
    """Undo `_link` after a failure: the engine's own (empty) folders back, no link left."""
    for part in MOVED:
        link, old = layer / part, layer / f".aes-old-{part}"
        if link.is_symlink():
            link.unlink()
        if old.is_dir():
            old.rename(link)
        elif not link.exists():
            link.mkdir(mode=0o700)


def _detach(target: Path) -> None:
    if _LIBC.umount2(os.fsencode(target), MNT_DETACH) != 0:
        errno = ctypes.get_errno()
        if errno not in (22, 2):  # EINVAL: not mounted; ENOENT: gone
            raise OSError(errno, f"umount {target}: {os.strerror(errno)}")


def _rmdir(target: Path) -> None:
    try:
        target.rmdir()
    except FileNotFoundError:
        pass


def _run(*argv: str, tries: int = 1) -> None:
    """Run a host tool; `tries` > 1 for a mount, which can lose a free loop device to another
    process setting one up at the same moment."""
    for attempt in range(tries):
        done = subprocess.run(argv, capture_output=True, text=True, env=FIXED_ENV, timeout=60)
        if done.returncode == 0:
            return
        if attempt == tries - 1:
            why = (done.stderr or done.stdout).strip()
            raise NotConfinedError(f"{Path(argv[0]).name}: {why}")


def _owner_of(path: Path) -> str:
    return path.name.removesuffix(".img").rsplit("-", 1)[0]


def _remove_leftovers(folder: Path) -> None:
    """Backing files and mounts of processes that died between `confine` and `release` (a live
    process unlinks its backing file at once and detaches its mount as its container starts)."""
    for path in folder.iterdir():
        if cleanup.owner_alive(_owner_of(path)) is True:
            continue
        if path.is_dir():
            _detach(path)
            _rmdir(path)
        else:
            path.unlink(missing_ok=True)
