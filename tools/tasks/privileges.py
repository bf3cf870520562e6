"""Strip what could carry privilege out of a folder a sandbox wrote into (a bound candidate).

A folder bound into a sandbox is written by container root: the kernel keeps whatever modes
and links it made on the host. `strip_privileges` makes the folder plain again: setuid, setgid
(and sticky) bits cleared, FIFOs, sockets and device nodes removed, hard-linked files replaced
by private copies. Symlinks are left as they are (never followed); lint refuses them.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

_SETID = stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX


def _unlink_copy(path: str) -> None:
    """Replace a hard-linked file by a copy of its own, so no other name shares its inode."""
    tmp = f"{path}.aes-unlink-{os.getpid()}"
    shutil.copyfile(path, tmp, follow_symlinks=False)
    os.chmod(tmp, stat.S_IMODE(os.lstat(path).st_mode) & ~_SETID)
    os.replace(tmp, path)


def strip_privileges(root: Path | str) -> list[str]:
    """Make every entry under `root` plain; return what changed ('path: why'), relative."""
    changed: list[str] = []
    root = str(root)
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            rel = os.path.relpath(path, root)
            try:
                info = os.lstat(path)
                mode = info.st_mode
                if stat.S_ISLNK(mode):
                    continue
                if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                    os.unlink(path)
                    changed.append(f"{rel}: removed (not a regular file or folder)")
                    continue
                if stat.S_ISREG(mode) and info.st_nlink > 1:
                    _unlink_copy(path)
                    changed.append(f"{rel}: hard link replaced by a copy")
                elif mode & _SETID:
                    os.chmod(path, stat.S_IMODE(mode) & ~_SETID, follow_symlinks=False)
                    changed.append(f"{rel}: setuid/setgid/sticky bits cleared")
            except OSError as exc:  # a race with a writer: say so, never stop the sweep
                changed.append(f"{rel}: could not be made plain ({exc.strerror})")
    return changed
