"""File operations confined to one root folder, with size caps, for agents' filesystem tools.

Every result is a pydantic model sized for a model's context; every refusal is a
`PathRefusedError` whose reason code and message say what went wrong and what to do instead.
"""

from __future__ import annotations

import fnmatch
import glob as globlib
import os
import re
import secrets
import stat
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, Field

from autoenvscaling.tools.safe_paths import PathRefusedError, SafeRoot

_BINARY_PROBE = 8192
_SKIP_DIRS = {".git", "__pycache__", "node_modules", ".venv"}


class FsLimits(BaseModel):
    max_file_bytes: int = Field(
        10_000_000, description="Larger files are not read, edited or grepped."
    )
    max_read_bytes: int = Field(64_000, description="Most content one read returns.")
    max_write_bytes: int = Field(
        2_000_000, description="Largest content one write or edit may produce."
    )
    max_entries: int = Field(1000, description="Most entries a listing or glob returns.")
    max_matches: int = Field(200, description="Most lines a grep returns.")
    max_line_chars: int = Field(400, description="Longest grep line shown; longer ones are cut.")


class ReadResult(BaseModel):
    path: str
    content: str
    start_line: int
    end_line: int = Field(description="Last line returned (0 when none).")
    total_lines: int
    file_bytes: int
    truncated: bool = Field(description="True when the byte cap stopped the read early.")
    next_start_line: int | None = Field(description="Where to continue reading; None at the end.")


class WriteResult(BaseModel):
    path: str
    bytes_written: int
    created: bool


class EditResult(BaseModel):
    path: str
    line: int = Field(description="Line where the replaced text started.")
    bytes_written: int


class Entry(BaseModel):
    name: str
    kind: Literal["file", "dir", "symlink", "other"]
    size: int | None = None
    target: str | None = Field(None, description="Symlink target, when it stays inside the root.")


class ListResult(BaseModel):
    path: str
    entries: list[Entry]
    truncated: bool


class GlobResult(BaseModel):
    pattern: str
    matches: list[str]
    truncated: bool
    skipped_outside: int = Field(
        0, description="Matches dropped because they resolve outside the root."
    )


class GrepMatch(BaseModel):
    path: str
    line: int
    text: str


class GrepResult(BaseModel):
    pattern: str
    matches: list[GrepMatch]
    files_searched: int
    truncated: bool
    skipped: int = Field(0, description="Files skipped: binary, too large, or unreadable.")


class RootedFs:
    """The operations behind the filesystem MCP server."""

    def __init__(self, root: str | os.PathLike[str], limits: FsLimits | None = None) -> None:
        self.safe = SafeRoot(root)
        self.limits = limits or FsLimits()

    # -- reading -----------------------------------------------------------------------------

    def _read_bytes(self, path: str) -> bytes:
        with self.safe.open_fd(path, os.O_RDONLY | os.O_NONBLOCK) as (_, fd, _name):
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise PathRefusedError(
                    path, "not_a_file", "not a regular file (a folder, fifo or device)"
                )
            if info.st_size > self.limits.max_file_bytes:
                raise PathRefusedError(
                    path,
                    "too_large",
                    f"the file is {info.st_size:,} bytes, over the {self.limits.max_file_bytes:,}-byte "
                    "limit; use grep to find what you need",
                )
            with os.fdopen(os.dup(fd), "rb") as handle:
                data = handle.read(self.limits.max_file_bytes + 1)
        if len(data) > self.limits.max_file_bytes:  # grew while we read it
            raise PathRefusedError(
                path, "too_large", "the file grew past the size limit while read"
            )
        return data

    def _read_text(self, path: str) -> tuple[str, int]:
        """The file's text (invalid UTF-8 replaced) and its size in bytes."""
        data = self._read_bytes(path)
        if b"\x00" in data[:_BINARY_PROBE]:
            raise PathRefusedError(
                path, "binary", "a binary file; inspect it with the terminal instead"
            )
        return data.decode("utf-8", errors="replace"), len(data)

    def read(self, path: str, start_line: int = 1, end_line: int | None = None) -> ReadResult:
        """Lines start_line..end_line (1-based, inclusive) of a text file, capped in bytes."""
        if start_line < 1 or (end_line is not None and end_line < start_line):
            raise PathRefusedError(path, "invalid", "need 1 <= start_line <= end_line")
        text, file_bytes = self._read_text(path)
        lines = _lines(text)
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
            path=self.safe.relative(self.safe.resolve(path)),
            content="".join(out),
            start_line=start_line,
            end_line=i if out else 0,
            total_lines=len(lines),
            file_bytes=file_bytes,
            truncated=truncated,
            next_start_line=i + 1 if i < stop else None,
        )

    # -- writing -----------------------------------------------------------------------------

    def _replace_file(self, path: str, data: bytes) -> bool:
        """Write `data` to a temporary file next to `path`, then rename it over `path` (atomic)."""
        if len(data) > self.limits.max_write_bytes:
            raise PathRefusedError(
                path,
                "too_large",
                f"{len(data):,} bytes is over the {self.limits.max_write_bytes:,}-byte write limit",
            )
        real = self.safe.resolve(path)
        if real == self.safe.root or real.is_dir():
            raise PathRefusedError(path, "not_a_file", "the path is a directory")
        created = not real.exists()
        mode = stat.S_IMODE(real.stat().st_mode) if not created else 0o644
        temp_name = f".{real.name}.{secrets.token_hex(4)}.tmp"
        temp = (real.parent / temp_name).relative_to(self.safe.root).as_posix()
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        with self.safe.open_fd(temp, flags, mode, make_parents=True) as (dir_fd, fd, name):
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fchmod(fd, mode)
                os.replace(name, real.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            except BaseException:
                try:
                    os.unlink(name, dir_fd=dir_fd)
                except FileNotFoundError:
                    pass
                raise
        return created

    def write(self, path: str, content: str) -> WriteResult:
        """Create or overwrite a file (parent folders are created)."""
        data = content.encode()
        created = self._replace_file(path, data)
        return WriteResult(
            path=self.safe.relative(self.safe.resolve(path)),
            bytes_written=len(data),
            created=created,
        )

    def edit(self, path: str, old: str, new: str) -> EditResult:
        """Replace the one occurrence of `old` with `new`; refuse when `old` is absent or repeated."""
        if not old:
            raise PathRefusedError(
                path, "invalid", "old text is empty; use write_file to create files"
            )
        text, _ = self._read_text(path)
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
        self._replace_file(path, data)
        return EditResult(
            path=self.safe.relative(self.safe.resolve(path)),
            line=text.count("\n", 0, at) + 1,
            bytes_written=len(data),
        )

    # -- listing and searching ---------------------------------------------------------------

    def _directory(self, path: str) -> Path:
        real = self.safe.resolve(path)
        if not real.exists():
            raise PathRefusedError(path, "not_found", "no such folder")
        if not real.is_dir():
            raise PathRefusedError(path, "not_a_directory", "not a folder")
        return real

    def list(self, path: str = ".") -> ListResult:
        real = self._directory(path)
        entries: list[Entry] = []
        with os.scandir(real) as scan:
            items = sorted(scan, key=lambda e: e.name)
        for item in items[: self.limits.max_entries]:
            if item.is_symlink():
                inside = self.safe.is_inside(Path(item.path))
                entries.append(
                    Entry(
                        name=item.name,
                        kind="symlink",
                        target=os.readlink(item.path) if inside else None,
                    )
                )
            elif item.is_dir(follow_symlinks=False):
                entries.append(Entry(name=item.name, kind="dir"))
            elif item.is_file(follow_symlinks=False):
                entries.append(
                    Entry(
                        name=item.name, kind="file", size=item.stat(follow_symlinks=False).st_size
                    )
                )
            else:
                entries.append(Entry(name=item.name, kind="other"))
        return ListResult(
            path=self.safe.relative(real),
            entries=entries,
            truncated=len(items) > self.limits.max_entries,
        )

    def _check_pattern(self, pattern: str) -> None:
        pure = PurePosixPath(pattern)
        if pure.is_absolute():
            raise PathRefusedError(pattern, "absolute", "glob patterns are relative to the root")
        if ".." in pure.parts:
            raise PathRefusedError(pattern, "traversal", "'..' is not allowed in glob patterns")

    def glob(self, pattern: str, path: str = ".") -> GlobResult:
        """Paths matching `pattern` (`**` spans folders; symlinked folders are not descended)."""
        self._check_pattern(pattern)
        base = self._directory(path)
        matches: list[str] = []
        skipped = 0
        truncated = False
        for match in globlib.iglob(pattern, root_dir=base, recursive=True):
            candidate = base / match
            if not self.safe.is_inside(candidate):
                skipped += 1
                continue
            if len(matches) >= self.limits.max_entries:
                truncated = True
                break
            matches.append(candidate.relative_to(self.safe.root).as_posix())
        return GlobResult(
            pattern=pattern, matches=sorted(matches), truncated=truncated, skipped_outside=skipped
        )

    def _walk_files(self, base: Path, include: str | None) -> list[Path]:
        if base.is_file():
            return [base]
        files = []
        for folder, dirs, names in os.walk(base, followlinks=False):
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
            for name in sorted(names):
                rel = (Path(folder) / name).relative_to(base).as_posix()
                if include and not (
                    fnmatch.fnmatch(rel, include) or fnmatch.fnmatch(name, include)
                ):
                    continue
                files.append(Path(folder) / name)
        return files

    def grep(
        self,
        pattern: str,
        path: str = ".",
        *,
        include: str | None = None,
        ignore_case: bool = False,
        fixed: bool = False,
    ) -> GrepResult:
        """Lines matching a regular expression (or a fixed string) in files under `path`."""
        try:
            regex = re.compile(
                re.escape(pattern) if fixed else pattern, re.IGNORECASE if ignore_case else 0
            )
        except re.error as exc:
            raise PathRefusedError(
                pattern, "bad_pattern", f"not a valid regular expression: {exc}"
            ) from exc
        base = self.safe.resolve(path)
        if not base.exists():
            raise PathRefusedError(path, "not_found", "no such file or folder")
        matches: list[GrepMatch] = []
        searched = skipped = 0
        truncated = False
        for file in self._walk_files(base, include):
            rel = file.relative_to(self.safe.root).as_posix()
            try:
                text, _ = self._read_text(rel)
            except PathRefusedError:
                skipped += 1  # symlinked out, binary, too large, special
                continue
            except OSError:
                skipped += 1
                continue
            searched += 1
            for number, line in enumerate(_lines(text), start=1):
                line = line.rstrip("\n")
                if regex.search(line):
                    if len(matches) >= self.limits.max_matches:
                        truncated = True
                        break
                    shown = (
                        line
                        if len(line) <= self.limits.max_line_chars
                        else (line[: self.limits.max_line_chars] + " [...]")
                    )
                    matches.append(GrepMatch(path=rel, line=number, text=shown))
            if truncated:
                break
        return GrepResult(
            pattern=pattern,
            matches=matches,
            files_searched=searched,
            truncated=truncated,
            skipped=skipped,
        )


def _lines(text: str) -> list[str]:
    """Lines split on "\n" only (as editors and grep count them), each keeping its newline."""
    lines = [line + "\n" for line in text.split("\n")]
    lines[-1] = lines[-1][:-1]
    return lines if lines[-1] else lines[:-1]
