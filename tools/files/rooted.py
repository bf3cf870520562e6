"""File operations confined to one root folder, with size caps, for agents' filesystem tools.

Every result is a pydantic model sized for a model's context (models.py); every refusal is a
`PathRefusedError` whose reason code and message say what went wrong and what to do instead.
Paths are opened at the descriptor level (safe_paths.py); glob and grep match in bounded time
(matching.py).
"""

from __future__ import annotations

import contextlib
import fnmatch
import os
import secrets
import stat
import time
from collections.abc import Iterator
from pathlib import PurePosixPath

from .matching import compile_search, glob_match, split_lines
from .models import (
    EditResult,
    Entry,
    FsLimits,
    GlobResult,
    GrepMatch,
    GrepResult,
    ListResult,
    ReadResult,
    WriteResult,
)
from .safe_paths import (
    DIR_FLAGS,
    PathRefusedError,
    SafeRoot,
    os_refusal,
)

_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_BINARY_PROBE = 8192
_SKIP_DIRS = frozenset({".git", "__pycache__", "node_modules", ".venv"})


class RootedFs:
    """The operations behind the filesystem MCP server."""

    def __init__(self, root: str | os.PathLike[str], limits: FsLimits | None = None) -> None:
        self.safe = SafeRoot(root)
        self.limits = limits or FsLimits()

    # -- reading -----------------------------------------------------------------------------

    def _read_bytes(self, path: str) -> tuple[bytes, str]:
        """The bytes of a regular file and its real relative path."""
        with self.safe.walk(path) as where:
            if where.name == "":
                raise PathRefusedError(path, "not_a_file", "the path is a directory")
            if where.st is None:
                raise PathRefusedError(path, "not_found", "no such file or folder")
            data = self._read_at(path, where.dir_fd, where.name)
            return data, where.rel

    def _read_at(self, path: str, dir_fd: int, name: str) -> bytes:
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            raise os_refusal(path, exc) from None
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PathRefusedError(
                    path, "not_a_file", "not a regular file (a folder, fifo or device)"
                )
            if info.st_size > self.limits.max_file_bytes:
                raise PathRefusedError(
                    path,
                    "too_large",
                    f"the file is {info.st_size:,} bytes, over the {self.limits.max_file_bytes:,}"
                    "-byte limit; use grep to find what you need",
                )
        except BaseException:
            os.close(fd)
            raise
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(self.limits.max_file_bytes + 1)
        if len(data) > self.limits.max_file_bytes:  # grew while we read it
            raise PathRefusedError(
                path, "too_large", "the file grew past the size limit while read"
            )
        return data

    @staticmethod
    def _as_text(path: str, data: bytes) -> str:
        if b"\x00" in data[:_BINARY_PROBE]:
            raise PathRefusedError(
                path, "binary", "a binary file; inspect it with the terminal instead"
            )
        return data.decode("utf-8", errors="replace")

    def read(self, path: str, start_line: int = 1, end_line: int | None = None) -> ReadResult:
        """Lines start_line..end_line (1-based, inclusive) of a text file, capped in bytes."""
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise PathRefusedError(path, "invalid", "need 1 <= start_line <= end_line")
        data, rel = self._read_bytes(path)
        text = self._as_text(path, data)
        lines = split_lines(text)
        stop = len(lines) if end_line is None else min(end_line, len(lines))
        budget = self.limits.max_read_bytes
        out: list[str] = []
        truncated = False
        i = start_line - 1  # index of the next line to return
        while i < stop:
            line_bytes = len(lines[i].encode())
            if line_bytes > budget:
                truncated = True
                if not out:  # one line longer than the cap: return its start, not nothing
                    out.append(lines[i].encode()[:budget].decode(errors="ignore") + "\n")
                    i += 1
                break
            out.append(lines[i])
            budget -= line_bytes
            i += 1
        return ReadResult(
            path=rel,
            content="".join(out),
            start_line=start_line,
            end_line=i if out else 0,
            total_lines=len(lines),
            file_bytes=len(data),
            truncated=truncated,
            next_start_line=i + 1 if i < stop else None,
        )

    # -- writing -----------------------------------------------------------------------------

    def _replace_file(self, path: str, data: bytes) -> tuple[bool, str]:
        """Write `data` to a temporary file next to `path`, then rename it over `path` (atomic).

        Both happen relative to the descriptor of the walked folder: a link swapped in for the
        name is replaced, never written through. Returns (created, real relative path).
        """
        if len(data) > self.limits.max_write_bytes:
            raise PathRefusedError(
                path,
                "too_large",
                f"{len(data):,} bytes is over the {self.limits.max_write_bytes:,}-byte write limit",
            )
        with self.safe.walk(path, make_parents=True) as where:
            if where.name == "" or (where.st is not None and stat.S_ISDIR(where.st.st_mode)):
                raise PathRefusedError(path, "not_a_file", "the path is a directory")
            if where.st is not None and not stat.S_ISREG(where.st.st_mode):
                raise PathRefusedError(path, "not_a_file", "not a regular file (a fifo or device)")
            created = where.st is None
            mode = 0o644 if where.st is None else stat.S_IMODE(where.st.st_mode)
            temp = f".{where.name[:100]}.{secrets.token_hex(4)}.tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                fd = os.open(temp, flags, mode, dir_fd=where.dir_fd)
            except OSError as exc:
                raise PathRefusedError(path, "invalid", exc.strerror or "cannot write") from None
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(data)
                    os.fchmod(handle.fileno(), mode)
                os.replace(temp, where.name, src_dir_fd=where.dir_fd, dst_dir_fd=where.dir_fd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temp, dir_fd=where.dir_fd)
                raise
            return created, where.rel

    def write(self, path: str, content: str) -> WriteResult:
        """Create or overwrite a file (parent folders are created)."""
        data = content.encode()
        created, rel = self._replace_file(path, data)
        return WriteResult(path=rel, bytes_written=len(data), created=created)

    def edit(self, path: str, old: str, new: str) -> EditResult:
        """Replace the one occurrence of `old` with `new`; refuse when `old` is absent or repeated."""
        if not old:
            raise PathRefusedError(
                path, "invalid", "old text is empty; use write_file to create files"
            )
        raw, _ = self._read_bytes(path)
        text = self._as_text(path, raw)
        count = text.count(old)
        if count == 0:
            raise PathRefusedError(
                path,
                "not_found",
                "the old text was not found; read the file and copy the text exactly "
                "(whitespace and indentation matter)",
            )
        if count > 1:
            raise PathRefusedError(
                path,
                "not_unique",
                f"the old text occurs {count} times; include surrounding lines so it matches once",
            )
        at = text.index(old)
        data = (text[:at] + new + text[at + len(old) :]).encode()
        _, rel = self._replace_file(path, data)
        return EditResult(path=rel, line=text.count("\n", 0, at) + 1, bytes_written=len(data))

    # -- listing and searching ---------------------------------------------------------------

    def list(self, path: str = ".") -> ListResult:
        entries: list[Entry] = []
        with self.safe.open_dir(path) as (fd, rel):
            with os.scandir(fd) as scan:
                items = []
                for item in scan:  # bounded: never more than max_entries + 1 kept
                    items.append(item)
                    if len(items) > self.limits.max_walk_entries:
                        break
            items.sort(key=lambda e: e.name)
            for item in items[: self.limits.max_entries]:
                entries.append(self._entry(item, fd, rel))
        return ListResult(path=rel, entries=entries, truncated=len(items) > self.limits.max_entries)

    def _entry(self, item: os.DirEntry[str], dir_fd: int, rel: str) -> Entry:
        if item.is_symlink():
            try:
                target = os.readlink(item.name, dir_fd=dir_fd)
            except OSError:
                target = None
            inside = target is not None and _stays_inside(rel, target)
            return Entry(name=item.name, kind="symlink", target=target if inside else None)
        if item.is_dir(follow_symlinks=False):
            return Entry(name=item.name, kind="dir")
        if item.is_file(follow_symlinks=False):
            try:
                size = os.stat(item.name, dir_fd=dir_fd, follow_symlinks=False).st_size
            except OSError:
                size = None
            return Entry(name=item.name, kind="file", size=size)
        return Entry(name=item.name, kind="other")

    def _tree(
        self, fd: int, rel: str, *, skip_dirs: frozenset[str] = frozenset()
    ) -> Iterator[tuple[str, str, int, str]]:
        """(relative path, kind, folder fd, name) below the open folder `fd`, depth first.

        Never follows a link; stops after `max_walk_entries` entries or below `max_depth`
        folders (raising `_Budget`). Folders are opened by descriptor with O_NOFOLLOW, so one
        swapped for a link mid-walk is skipped, not entered.
        """
        budget = self.limits.max_walk_entries
        stack: list[tuple[int, str, int]] = [(os.dup(fd), rel, 0)]
        try:
            while stack:
                dir_fd, dir_rel, depth = stack.pop()
                try:
                    with os.scandir(dir_fd) as scan:
                        items = sorted(scan, key=lambda e: e.name)
                except OSError:
                    os.close(dir_fd)
                    continue
                children: list[tuple[int, str, int]] = []
                try:
                    for item in items:
                        budget -= 1
                        if budget < 0:
                            raise _Budget
                        child = item.name if dir_rel == "." else f"{dir_rel}/{item.name}"
                        if item.is_symlink():
                            yield child, "symlink", dir_fd, item.name
                        elif item.is_dir(follow_symlinks=False):
                            yield child, "dir", dir_fd, item.name
                            if item.name in skip_dirs:
                                continue
                            if depth + 1 > self.limits.max_depth:
                                raise _Budget
                            try:
                                sub = os.open(item.name, DIR_FLAGS, dir_fd=dir_fd)
                            except OSError:
                                continue  # swapped for a link or removed: not entered
                            children.append((sub, child, depth + 1))
                        elif item.is_file(follow_symlinks=False):
                            yield child, "file", dir_fd, item.name
                        else:
                            yield child, "other", dir_fd, item.name
                finally:
                    os.close(dir_fd)
                stack.extend(reversed(children))
        finally:
            for dir_fd, _, _ in stack:
                os.close(dir_fd)

    def _check_pattern(self, pattern: str) -> list[str]:
        if "\x00" in pattern:
            raise PathRefusedError(pattern, "invalid", "the pattern contains a NUL byte")
        pure = PurePosixPath(pattern)
        if pure.is_absolute():
            raise PathRefusedError(pattern, "absolute", "glob patterns are relative to the root")
        if ".." in pure.parts:
            raise PathRefusedError(pattern, "traversal", "'..' is not allowed in glob patterns")
        parts = [p for p in pure.parts if p != "."]
        if not parts or len(parts) > 32 or len(pattern) > 1000:
            raise PathRefusedError(pattern, "bad_pattern", "give a pattern such as '**/*.py'")
        return parts

    def glob(self, pattern: str, path: str = ".") -> GlobResult:
        """Paths matching `pattern` (`**` spans folders; symlinks are listed, never entered)."""
        parts = self._check_pattern(pattern)
        matches: list[str] = []
        truncated = False
        with self.safe.open_dir(path) as (fd, rel):
            prefix = "" if rel == "." else rel + "/"
            try:
                for child, _kind, _dir_fd, _name in self._tree(fd, rel):
                    below = child[len(prefix) :].split("/")
                    if glob_match(parts, below):
                        if len(matches) >= self.limits.max_entries:
                            truncated = True
                            break
                        matches.append(child)
            except _Budget:
                truncated = True
        return GlobResult(pattern=pattern, matches=sorted(matches), truncated=truncated)

    def grep(
        self,
        pattern: str,
        path: str = ".",
        *,
        include: str | None = None,
        ignore_case: bool = False,
        fixed: bool = False,
    ) -> GrepResult:
        """Lines matching a regular expression (or a fixed string) in files under `path`.

        The regex engine is linear-time (RE2) where installed; otherwise each line gets a time
        limit. The whole search stops at `max_grep_bytes` read or `max_grep_sec`.
        """
        search = compile_search(pattern, ignore_case=ignore_case, fixed=fixed)
        matches: list[GrepMatch] = []
        searched = skipped = 0
        truncated = False
        deadline = time.monotonic() + self.limits.max_grep_sec
        scanned = 0

        def scan(rel: str, dir_fd: int, name: str) -> bool:
            """Search one file; False when the match cap was hit."""
            nonlocal searched, skipped, scanned
            try:
                text = self._as_text(rel, self._read_at(rel, dir_fd, name))
            except PathRefusedError:
                skipped += 1  # binary, too large, special, swapped for a link
                return True
            searched += 1
            scanned += len(text)
            for number, line in enumerate(split_lines(text), start=1):
                line = line.rstrip("\n")
                if search(line):
                    if len(matches) >= self.limits.max_matches:
                        return False
                    shown = (
                        line
                        if len(line) <= self.limits.max_line_chars
                        else (line[: self.limits.max_line_chars] + " [...]")
                    )
                    matches.append(GrepMatch(path=rel, line=number, text=shown))
            return True

        with self.safe.walk(path) as where:
            if where.name and where.st is None:
                raise PathRefusedError(path, "not_found", "no such file or folder")
            if where.name and where.st is not None and not stat.S_ISDIR(where.st.st_mode):
                if stat.S_ISLNK(where.st.st_mode) or not stat.S_ISREG(where.st.st_mode):
                    skipped += 1
                else:
                    truncated = not scan(where.rel, where.dir_fd, where.name)
                return GrepResult(
                    pattern=pattern,
                    matches=matches,
                    files_searched=searched,
                    truncated=truncated,
                    skipped=skipped,
                )
        with self.safe.open_dir(path) as (fd, rel):
            try:
                for child, kind, dir_fd, name in self._tree(fd, rel, skip_dirs=_SKIP_DIRS):
                    if kind == "dir":
                        continue
                    if kind != "file":
                        skipped += 1
                        continue
                    if include and not (
                        fnmatch.fnmatch(child, include) or fnmatch.fnmatch(name, include)
                    ):
                        continue
                    if (
                        time.monotonic() > deadline
                        or scanned > self.limits.max_grep_bytes
                        or not scan(child, dir_fd, name)
                    ):
                        truncated = True
                        break
            except _Budget:
                truncated = True
        return GrepResult(
            pattern=pattern,
            matches=matches,
            files_searched=searched,
            truncated=truncated,
            skipped=skipped,
        )


class _Budget(Exception):
    """A walk reached its entry or depth limit."""


def _stays_inside(folder: str, target: str) -> bool:
    """Whether a relative link target, read in `folder` (root-relative), stays inside the root."""
    if target.startswith("/"):
        return False
    depth = 0 if folder == "." else len(folder.split("/"))
    for part in target.split("/"):
        depth += -1 if part == ".." else (0 if part in ("", ".") else 1)
        if depth < 0:
            return False
    return True
