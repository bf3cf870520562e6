"""Resolve and open paths strictly inside one root folder, at the file-descriptor level.

Every path is walked one component at a time from a descriptor of the root (`openat` with
`O_NOFOLLOW`), so no check can be raced: there is no moment where a path string is checked and a
different file is then opened. Symlinks are never followed by the kernel. A symlink met on the
way is read (`readlinkat`) and, when its target is relative and stays inside the root, walked in
its place (as a lexical rewrite of the remaining path, at most `MAX_LINKS` times); an absolute
target, or one that climbs above the root, is refused without looking at where it points. `..`
pops the walked stack; it never opens a parent, so a folder moved away mid-walk cannot lead out.

Refusals are `PathRefusedError`s whose message names only the path the caller gave (never a
path of this machine) and is the same whether or not anything exists behind a refused link.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
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

#: Most symlinks one resolution walks through (Linux's own limit is 40).
MAX_LINKS = 40
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


class PathRefusedError(ValueError):
    """An operation was refused. `reason` is a short code; the message says what to do instead."""

    def __init__(self, path: str, reason: RefusalReason, detail: str) -> None:
        self.path, self.reason, self.detail = path, reason, detail
        super().__init__(f"refused {_printable(path)!r} [{reason}]: {detail}")


def _printable(path: str) -> str:
    return path if len(path) <= 200 else path[:197] + "..."


@dataclass
class Resolved:
    """A walked path: `dir_fd` is an open descriptor of the final folder, `name` the last
    component inside it ("" for the root itself), `rel` the real root-relative path."""

    dir_fd: int
    name: str
    rel: str
    st: os.stat_result | None  # lstat of `name` in `dir_fd`; None when it does not exist


class SafeRoot:
    """One folder that every path is resolved against and confined to."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        resolved = Path(root).resolve()
        if not resolved.is_dir():
            raise NotADirectoryError("the root is not a directory")
        self.root = resolved

    # -- parsing ------------------------------------------------------------------------------

    @staticmethod
    def parts(path: str) -> list[str]:
        """The components of a relative path; refuses NUL bytes, absolute paths and climbing out."""
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
        return [p for p in pure.parts if p != "."]

    # -- walking -------------------------------------------------------------------------------

    @contextmanager
    def walk(
        self, path: str, *, follow_last: bool = True, make_parents: bool = False
    ) -> Iterator[Resolved]:
        """Walk `path` from the root; yields the final folder's descriptor (closed after)."""
        todo = deque(self.parts(path))
        with ExitStack() as fds:
            stack: list[tuple[str, int]] = []  # (name, fd) of each folder below the root
            root_fd = os.open(self.root, DIR_FLAGS)
            fds.callback(os.close, root_fd)
            links = 0

            def current() -> int:
                return stack[-1][1] if stack else root_fd

            def rel(name: str = "") -> str:
                return "/".join([n for n, _ in stack] + ([name] if name else [])) or "."

            while todo:
                part = todo.popleft()
                if part in ("", "."):
                    continue
                if part == "..":
                    if not stack:
                        raise PathRefusedError(
                            path, "symlink", "a symlink in the path leads outside the root"
                        )
                    stack.pop()  # its descriptor stays open until the walk ends
                    continue
                last = not todo
                try:
                    st = os.stat(part, dir_fd=current(), follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        yield Resolved(current(), part, rel(part), None)
                        return
                    if not make_parents:
                        raise PathRefusedError(
                            path, "not_found", "no such file or folder"
                        ) from None
                    os.mkdir(part, 0o755, dir_fd=current())
                    st = os.stat(part, dir_fd=current(), follow_symlinks=False)
                except OSError as exc:
                    raise os_refusal(path, exc) from None
                if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                    links += 1
                    if links > MAX_LINKS:
                        raise PathRefusedError(
                            path, "symlink", f"more than {MAX_LINKS} symlinks (a loop?)"
                        )
                    target = os.readlink(part, dir_fd=current())
                    if target.startswith("/") or "\x00" in target:
                        raise PathRefusedError(
                            path,
                            "symlink",
                            f"'{rel(part)}' is a symlink that leads outside the root",
                        )
                    todo.extendleft(reversed(target.split("/")))
                    continue
                if last:
                    yield Resolved(current(), part, rel(part), st)
                    return
                if not stat.S_ISDIR(st.st_mode):
                    raise PathRefusedError(
                        path, "not_a_directory", "a parent in the path is not a folder"
                    )
                try:
                    fd = os.open(part, DIR_FLAGS, dir_fd=current())
                except OSError as exc:  # swapped for a link or a file since the stat: refused
                    raise os_refusal(path, exc) from None
                fds.callback(os.close, fd)
                stack.append((part, fd))
            yield Resolved(current(), "", rel(), None if stack else os.fstat(root_fd))

    @contextmanager
    def open_dir(self, path: str) -> Iterator[tuple[int, str]]:
        """A readable descriptor of the folder `path` and its real relative path."""
        with self.walk(path) as where:
            if where.name == "":
                fd = os.dup(where.dir_fd)
            else:
                if where.st is None:
                    raise PathRefusedError(path, "not_found", "no such file or folder")
                if not stat.S_ISDIR(where.st.st_mode):
                    raise PathRefusedError(path, "not_a_directory", "not a folder")
                try:
                    fd = os.open(where.name, DIR_FLAGS, dir_fd=where.dir_fd)
                except OSError as exc:
                    raise os_refusal(path, exc) from None
            try:
                yield fd, where.rel
            finally:
                os.close(fd)


def os_refusal(path: str, exc: OSError) -> PathRefusedError:
    """An OSError of a walk as a refusal that names no path of this machine."""
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return PathRefusedError(path, "symlink", "a symlink appeared in the path while opening it")
    if exc.errno == errno.ENOTDIR:
        return PathRefusedError(path, "not_a_directory", "a parent in the path is not a folder")
    if exc.errno == errno.EISDIR:
        return PathRefusedError(path, "not_a_file", "the path is a directory")
    if exc.errno == errno.ENOENT:
        return PathRefusedError(path, "not_found", "no such file or folder")
    if exc.errno == errno.EEXIST:
        return PathRefusedError(path, "exists", "the file already exists")
    return PathRefusedError(path, "invalid", exc.strerror or type(exc).__name__)
