"""Resolve and open paths strictly inside one root folder, saying why a path is refused.

A path is refused when it is absolute, climbs out with `..`, or resolves outside the root through
a symlink (the file itself or any parent). Symlinks that stay inside the root are followed. Files
are then opened component by component with O_NOFOLLOW from a descriptor of the root, so a
symlink swapped in between the check and the open is caught instead of followed.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Literal

RefusalReason = Literal[
    "absolute",
    "traversal",
    "symlink",
    "invalid",
    "not_found",
    "not_a_file",
    "not_a_directory",
    "too_large",
    "binary",
    "not_unique",
    "bad_pattern",
    "exists",
]


class PathRefusedError(ValueError):
    """An operation was refused. `reason` is a short code; the message says what to do instead."""

    def __init__(self, path: str, reason: RefusalReason, detail: str) -> None:
        self.path, self.reason, self.detail = path, reason, detail
        super().__init__(f"refused {path!r} [{reason}]: {detail}")


class SafeRoot:
    """One folder that every path is resolved against and confined to."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise NotADirectoryError(f"root {str(root)!r} is not a directory")
        self.root = resolved

    def resolve(self, path: str) -> Path:
        """The real absolute path of `path` (relative to the root), which lies inside the root."""
        if "\x00" in path:
            raise PathRefusedError(path, "invalid", "the path contains a NUL byte")
        pure = PurePosixPath(path or ".")
        if pure.is_absolute():
            raise PathRefusedError(
                path,
                "absolute",
                "absolute paths are refused; give a path relative to the root, e.g. 'src/main.py'",
            )
        depth = 0
        for part in pure.parts:
            depth += -1 if part == ".." else (0 if part == "." else 1)
            if depth < 0:
                raise PathRefusedError(
                    path, "traversal", "'..' climbs out of the root; paths must stay inside it"
                )
        real = Path(os.path.realpath(self.root / pure))
        if not real.is_relative_to(self.root):
            raise PathRefusedError(path, "symlink", self._explain_escape(pure))
        return real

    def _explain_escape(self, pure: PurePosixPath) -> str:
        current = self.root
        for part in pure.parts:
            current = current / part
            if current.is_symlink():
                target = os.readlink(current)
                if not Path(os.path.realpath(current)).is_relative_to(self.root):
                    shown = current.relative_to(self.root).as_posix()
                    return f"'{shown}' is a symlink to {target!r}, which is outside the root"
        return "the path resolves outside the root"

    def relative(self, real: Path) -> str:
        """`real` (inside the root) as a root-relative POSIX path."""
        rel = real.relative_to(self.root).as_posix()
        return rel if rel else "."

    def is_inside(self, path: Path) -> bool:
        return Path(os.path.realpath(path)).is_relative_to(self.root)

    @contextmanager
    def open_fd(
        self, path: str, flags: int, mode: int = 0o644, *, make_parents: bool = False
    ) -> Iterator[tuple[int, int, str]]:
        """Open `path` without following any symlink created after it was resolved.

        Yields (fd of the parent directory, fd of the file, file name); both are closed after.
        """
        real = self.resolve(path)
        parts = real.relative_to(self.root).parts
        if not parts:
            raise PathRefusedError(path, "not_a_file", "the root itself is a directory")
        dir_fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                try:
                    next_fd = os.open(
                        part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd
                    )
                except FileNotFoundError:
                    if not make_parents:
                        raise PathRefusedError(
                            path, "not_found", f"folder {part!r} does not exist"
                        ) from None
                    os.mkdir(part, 0o755, dir_fd=dir_fd)
                    next_fd = os.open(
                        part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dir_fd
                    )
                except OSError as exc:
                    raise self._open_error(path, exc, dir_fd, part) from exc
                os.close(dir_fd)
                dir_fd = next_fd
            try:
                fd = os.open(parts[-1], flags | os.O_NOFOLLOW, mode, dir_fd=dir_fd)
            except FileNotFoundError:
                raise PathRefusedError(path, "not_found", "no such file") from None
            except OSError as exc:
                raise self._open_error(path, exc, dir_fd, parts[-1]) from exc
            try:
                yield dir_fd, fd, parts[-1]
            finally:
                os.close(fd)
        finally:
            os.close(dir_fd)

    @staticmethod
    def _open_error(path: str, exc: OSError, dir_fd: int, name: str) -> PathRefusedError:
        try:
            is_link = stat.S_ISLNK(os.lstat(name, dir_fd=dir_fd).st_mode)
        except OSError:
            is_link = False
        if is_link or exc.errno in (errno.ELOOP, errno.EMLINK):
            return PathRefusedError(
                path, "symlink", "a symlink appeared in the path while opening it"
            )
        if exc.errno == errno.ENOTDIR:
            return PathRefusedError(path, "not_a_directory", "a parent in the path is not a folder")
        if exc.errno == errno.EISDIR:
            return PathRefusedError(path, "not_a_file", "the path is a directory")
        return PathRefusedError(path, "invalid", exc.strerror or str(exc))
