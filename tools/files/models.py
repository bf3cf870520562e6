"""What the rooted filesystem returns and how far it may go: its limits and one result model per
operation, each sized for a model's context.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

try:  # google-re2: linear-time matching, so no pattern can make grep hang
    import re2 as _re2
except ImportError:  # pragma: no cover - the fallback puts a time limit on each line
    _re2 = None


class FsLimits(BaseModel):
    max_file_bytes: int = Field(
        default=10_000_000, description="Larger files are not read, edited or grepped."
    )
    max_read_bytes: int = Field(default=64_000, description="Most content one read returns.")
    max_write_bytes: int = Field(
        default=2_000_000, description="Largest content one write or edit may produce."
    )
    max_entries: int = Field(default=1000, description="Most entries a listing or glob returns.")
    max_matches: int = Field(default=200, description="Most lines a grep returns.")
    max_line_chars: int = Field(
        default=400, description="Longest grep line shown; longer ones are cut."
    )
    max_walk_entries: int = Field(
        default=20_000, description="Most entries a glob or grep walk visits before it stops."
    )
    max_depth: int = Field(default=64, description="Deepest folder a glob or grep walk enters.")
    max_grep_bytes: int = Field(default=50_000_000, description="Most text one grep searches.")
    max_grep_sec: float = Field(default=10.0, description="Longest one grep runs before it stops.")


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
    target: str | None = Field(
        default=None, description="Symlink target, when it stays inside the root."
    )


class ListResult(BaseModel):
    path: str
    entries: list[Entry]
    truncated: bool


class GlobResult(BaseModel):
    pattern: str
    matches: list[str]
    truncated: bool = Field(description="True when a cap (entries, depth) stopped the walk.")


class GrepMatch(BaseModel):
    path: str
    line: int
    text: str


class GrepResult(BaseModel):
    pattern: str
    matches: list[GrepMatch]
    files_searched: int
    truncated: bool
    skipped: int = Field(default=0, description="Files skipped: binary, too large, or unreadable.")
