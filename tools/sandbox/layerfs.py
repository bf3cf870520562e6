"""The writable layer on a filesystem of its own: a cap the kernel enforces, with no window.

Quotas cannot do it here: `--storage-opt size=` needs XFS project quotas, and this kind of host's
kernel has no quota support at all (XFS: "quota support not available in this kernel"; ext4:
"not built with CONFIG_QUOTA"). So before a container starts, its layer folder in the engine's
overlay store (`diff`, `work`, `merged`, `link`, `lower`: upper and work must share one mount) is
moved onto a journal-less ext4 of `disk_mb` with one inode per `BYTES_PER_INODE`, on a loop
device. A write or a file past the cap fails at once with ENOSPC, and `df /` in the sandbox shows
its real size. The backing file is sparse (it takes only what is written) and unlinked once
mounted; the engine's removal of the container unmounts the folder (podman and docker both remove
a layer with EnsureRemoveAll, which unmounts), and the loop device, set to auto-clear, goes with it.

Where this cannot be done (a remote engine, not root, no loop device), `confine` says why and the
measured cap (layercap.py) applies instead.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

from autoenvscaling.tools.sandbox import cleanup
from autoenvscaling.tools.sandbox.layercap import BYTES_PER_INODE, upper_dir

MKFS = "/usr/sbin/mkfs.ext4"
MOUNT = "/usr/bin/mount"
FIXED_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C"}
#: Beside the engine's store, so the layer's bytes land on the same disk as before.
BACKING_FOLDER = "aes-layers"


class NotConfinedError(Exception):
    """The layer stays where the engine put it; the message says why."""


def confine(api: Any, container_id: str, disk_mb: int) -> str:
    """Move a created (not yet started) container's writable layer onto a filesystem of
    `disk_mb`. Returns what now holds it; raises NotConfinedError with the reason otherwise."""
    if os.geteuid() != 0:
        raise NotConfinedError("not root: no loop mount")
    upper = upper_dir(api, container_id)
    if upper is None or upper.name != "diff" or not (upper.parent / "link").is_file():
        raise NotConfinedError("no local overlay layer (a remote engine or another driver)")
    layer = upper.parent
    backing = layer.parent.parent / BACKING_FOLDER / f"{cleanup.owner()}-{container_id[:12]}.img"
    try:
        mode = layer.stat().st_mode & 0o7777
        backing.parent.mkdir(mode=0o700, exist_ok=True)
        _remove_leftovers(backing.parent)
        with open(backing, "xb") as handle:
            os.truncate(handle.fileno(), disk_mb * 1024 * 1024)
        _run(
            MKFS, "-q", "-F", "-m", "0", "-O", "^has_journal",
            "-N", str(max(disk_mb * 1024 * 1024 // BYTES_PER_INODE, 1024)),
            "-E", "lazy_itable_init=1,nodiscard", "-d", str(layer), str(backing),
        )  # fmt: skip
        # noinit_itable: the backing file reads as zeros, nothing to zero in the background.
        options = "loop,nosuid,nodev,noinit_itable"
        _run(MOUNT, "-t", "ext4", "-o", options, str(backing), str(layer), tries=3)
        os.chmod(layer, mode)
    except (OSError, subprocess.SubprocessError, NotConfinedError) as exc:
        raise NotConfinedError(f"loop filesystem not made: {exc}") from exc
    finally:
        backing.unlink(missing_ok=True)
    return f"ext4 of {disk_mb} MB on a loop device"


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


def _remove_leftovers(folder: Path) -> None:
    """Backing files of processes that died between making one and unlinking it (a mounted
    one is unlinked at once, so any file here is such a leftover or another live process's)."""
    for path in folder.glob("*.img"):
        if cleanup.owner_alive(path.stem.rsplit("-", 1)[0]) is not True:
            path.unlink(missing_ok=True)
