"""The viewer's reads of a run's files: regular files inside the run folder, nothing else.

Whoever can write the run folder decides what each name in it is: a link to a host file would
show that file on a page, and a FIFO would block the thread that opens it (forty of them, the
server's whole thread pool, and every page hangs). So every read walks its path from the run's
root at the descriptor level (tools/files/safe_paths.py: a link is followed only while it stays
inside the root), opens the last name with O_NOFOLLOW | O_NONBLOCK, and reads only what fstat
calls a regular file. A refusal is `PathOutsideRun`, whose message names the path as the caller
gave it, never a path of this machine.

SQLite files cannot be opened from a descriptor: `regular_or_absent` checks them (and their
-wal/-shm) by lstat just before SQLite opens them, which a writer racing the check could still
swap; the files the pages show go through `open_regular`, which no swap can fool.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..tools.files.safe_paths import PathRefusedError, SafeRoot

_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


class PathOutsideRun(ValueError):
    """A path is not a regular file or folder inside the run folder: outside it, through a link
    that leads out, a FIFO, socket or device, or not a path at all."""


def inside(root: Path, path: str | Path) -> str:
    """`path` (absolute under `root`, or relative to it) as a relative path, without following
    any link; PathOutsideRun when it is not under `root` as written."""
    p = Path(path)
    if not p.is_absolute():
        return p.as_posix()
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        raise PathOutsideRun("the path is outside the run folder") from None


@contextmanager
def open_regular(root: Path, relative: str) -> Iterator[tuple[int, int]]:
    """(descriptor, size) of the regular file `relative` inside `root`, closed after the block.
    FileNotFoundError when it does not exist, PathOutsideRun when it may not be read."""
    try:
        safe = SafeRoot(root)
        with safe.walk(relative) as where:
            if where.st is None:
                raise FileNotFoundError(f"{relative}: no such file")
            if where.name == "" or not stat.S_ISREG(where.st.st_mode):
                raise PathOutsideRun(f"{relative} is not a regular file")
            fd = os.open(where.name, _FLAGS, dir_fd=where.dir_fd)
    except PathRefusedError as exc:
        if exc.reason == "not_found":
            raise FileNotFoundError(f"{relative}: no such file") from None
        raise PathOutsideRun(f"{relative}: {exc.detail}") from None
    except NotADirectoryError:  # the run folder itself is not there (yet)
        raise FileNotFoundError(f"{relative}: no such file") from None
    except OSError as exc:  # swapped since the walk looked (a link now: ELOOP), or unreadable
        raise PathOutsideRun(f"{relative}: {exc.strerror or 'cannot be opened'}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise PathOutsideRun(f"{relative} is not a regular file")
        yield fd, info.st_size
    finally:
        os.close(fd)


def read_fd(fd: int, limit: int) -> bytes:
    """Up to `limit` bytes from the descriptor's position."""
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_regular(root: Path, path: str | Path, limit: int) -> bytes:
    """The whole of a regular file inside `root`; PathOutsideRun when it is over `limit` bytes
    (a page reads its records whole, or not at all)."""
    relative = inside(root, path)
    with open_regular(root, relative) as (fd, size):
        if size > limit:
            raise PathOutsideRun(f"{relative} is over {limit:,} bytes")
        return read_fd(fd, limit)


def regular_or_absent(path: Path, *suffixes: str) -> bool:
    """Whether `path` (and `path` + each suffix) is a regular file or not there, by lstat."""
    for candidate in (path, *(Path(f"{path}{s}") for s in suffixes)):
        try:
            if not stat.S_ISREG(candidate.lstat().st_mode):
                return False
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return True


def regular_files_under(root: Path, folder: str | Path, limit: int) -> list[str]:
    """Regular files under `folder` (inside `root`), relative to it, sorted, at most `limit`;
    links and special files left out, linked folders not entered."""
    try:
        relative = inside(root, folder)
        base = root / relative
        if not stat.S_ISDIR(base.lstat().st_mode) or not base.resolve().is_relative_to(root):
            return []
    except (PathOutsideRun, OSError, ValueError):
        return []
    found: list[str] = []
    for here, dirs, files in os.walk(base, followlinks=False):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in files:
            try:
                if stat.S_ISREG(os.lstat(os.path.join(here, name)).st_mode):
                    found.append(Path(here, name).relative_to(base).as_posix())
            except OSError:
                continue
        if len(found) > 10 * limit:  # a folder of millions: enough to sort and cut
            break
    return sorted(found)[:limit]
