"""The run folder as the viewer reads it: manifest, round history, pool, files — read-only.

Every reader tolerates a run that is still being written: a file not there yet is empty, a
file caught mid-write (the run replaces its files atomically, but a foreign one may not) reads
as missing rather than failing the page. Every file is read through regular_files.py: only
regular files inside the run folder, never through a link that leads out, never a FIFO.
"""

from __future__ import annotations

import json
import os
import stat
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from ..tools.report.metrics import RoundMetrics
from ..tools.rollouts.models import RolloutStoreError
from ..tools.rollouts.postgres import is_postgres_url
from ..tools.rollouts.store import RolloutStore
from ..tools.rollouts.transcripts import Transcript, load_transcript, transcript_path
from ..tools.run_dir import Manifest, RunDir
from ..tools.tasks.pool import PoolIndex
from .regular_files import (
    PathOutsideRun,
    inside,
    open_regular,
    read_fd,
    read_regular,
    regular_files_under,
    regular_or_absent,
)

#: The most of one file a page shows (the rest is named, not sent).
FILE_BYTES = 256 * 1024
#: The largest record (JSON, TOML) a page reads whole; a larger one reads as missing.
RECORD_BYTES = 16 * 1024 * 1024
#: The largest transcript a page reads.
TRANSCRIPT_BYTES = 64 * 1024 * 1024

__all__ = ["FILE_BYTES", "FileText", "PathOutsideRun", "RunFolder"]


class FileText(BaseModel):
    """A file of the run as text, cut at FILE_BYTES."""

    path: str
    text: str
    size: int
    truncated: bool
    binary: bool


class RunFolder:
    """One run folder; `RunFolder(root)` never creates or changes anything in it."""

    def __init__(self, root: Path) -> None:
        self.layout = RunDir(root)
        self.root = self.layout.root

    # -- records --------------------------------------------------------------------------

    def read_bytes(self, path: str | Path, limit: int = RECORD_BYTES) -> bytes | None:
        """A whole regular file of the run (absolute under it, or relative); None when it is
        not there, over `limit`, or may not be read (a link out, a FIFO)."""
        try:
            return read_regular(self.root, path, limit)
        except (OSError, ValueError):
            return None

    def read_json(self, path: str | Path) -> Any:
        data = self.read_bytes(path)
        try:
            return None if data is None else json.loads(data)
        except (ValueError, RecursionError):
            return None

    def manifest(self) -> Manifest | None:
        data = self.read_bytes(self.layout.manifest_path)
        try:
            return None if data is None else Manifest.model_validate_json(data)
        except (ValidationError, ValueError):
            return None

    def history(self) -> list[RoundMetrics]:
        """The finished rounds' metrics (reports/metrics.json), oldest first."""
        data = self.read_json(self.layout.reports / "metrics.json")
        if not isinstance(data, list):
            return []
        out = []
        for item in data:
            try:
                out.append(RoundMetrics.model_validate(item))
            except ValidationError:
                continue
        return out

    def pool(self) -> PoolIndex:
        data = self.read_bytes(self.layout.pool / "pool.json")
        try:
            return PoolIndex() if data is None else PoolIndex.model_validate_json(data)
        except (ValidationError, ValueError):
            return PoolIndex()

    def grpo_episode_rewards(self, round_: int) -> list[float] | None:
        """The scored rewards of the solver's GRPO episodes in a round (the training worker's
        result, train/rNN/result.json); None when the round trained no solver."""
        result = self.read_json(self.root / "train" / f"r{round_:02d}" / "result.json")
        episodes = result.get("episodes") if isinstance(result, dict) else None
        if not isinstance(episodes, list):
            return None
        return [
            float(e["reward"])
            for e in episodes
            if isinstance(e, dict) and isinstance(e.get("reward"), int | float)
        ]

    def candidate_rounds(self) -> list[int]:
        """Rounds with a candidates/rNN folder, in order."""
        folder = self.root / "candidates"
        if not folder.is_dir():
            return []
        return sorted(
            int(p.name[1:]) for p in folder.iterdir() if p.name[1:].isdigit() and p.is_dir()
        )

    @cached_property
    def _store(self) -> RolloutStore | None:
        location = self.layout.store
        # SQLite blocks opening a FIFO and follows a link: neither is the run's store.
        if not is_postgres_url(location) and not regular_or_absent(Path(location), "-wal", "-shm"):
            return None
        try:
            return RolloutStore(location, read_only=True)
        except RolloutStoreError:
            return None

    def store(self) -> RolloutStore | None:
        """The rollout store, read-only; None until the run has created it."""
        if "_store" in self.__dict__ and self.__dict__["_store"] is None:
            del self.__dict__["_store"]  # not there at first: look again
        return self._store

    def transcript(self, location: str, attempt_id: str) -> Transcript | None:
        """An attempt's transcript; one in the run folder is read as a regular file only."""
        if is_postgres_url(location):
            return load_transcript(location, attempt_id)
        try:
            data = self.read_bytes(transcript_path(location, attempt_id), TRANSCRIPT_BYTES)
            return None if data is None else Transcript.model_validate_json(data)
        except ValueError:
            return None

    # -- files ----------------------------------------------------------------------------

    def resolve(self, relative: str | Path) -> Path:
        """`relative` inside the run folder; refused when it (or a link on the way) leads out."""
        try:
            path = (self.root / relative).resolve()
        except (OSError, ValueError, RuntimeError):  # a NUL byte, a name too long, a link loop
            raise PathOutsideRun("not a path inside the run folder") from None
        if not path.is_relative_to(self.root):
            raise PathOutsideRun(f"{relative} is outside the run folder")
        return path

    def relative(self, path: str | Path) -> str | None:
        """A path (absolute, or relative to the run) as a path inside the run, if it is one."""
        p = Path(path)
        candidates = [p] if p.is_absolute() else [self.root / p]
        for candidate in candidates:
            try:
                resolved = candidate.resolve()
            except OSError:
                continue
            if resolved.is_relative_to(self.root):
                return resolved.relative_to(self.root).as_posix() or "."
        return None

    def read_text(
        self, relative: str | Path, limit: int = FILE_BYTES, *, tail: bool = False
    ) -> FileText:
        """The file's first `limit` bytes, or its last with `tail` (a log that grows); a
        regular file of the run only (PathOutsideRun otherwise)."""
        with open_regular(self.root, inside(self.root, relative)) as (fd, size):
            if tail and size > limit:
                os.lseek(fd, size - limit, os.SEEK_SET)
            data = read_fd(fd, limit)
        binary = b"\0" in data[:8192]
        return FileText(
            path=Path(relative).as_posix(),
            text="" if binary else data.decode("utf-8", errors="replace"),
            size=size,
            truncated=size > limit,
            binary=binary,
        )

    def listing(self, relative: str | Path) -> list[tuple[str, bool, int]]:
        """(name, is a folder, size) of a folder of the run, folders first."""
        folder = self.resolve(relative)
        entries = []
        for child in folder.iterdir():
            try:
                info = child.lstat()  # a link's target is not shown, not even its size
            except OSError:
                continue
            is_dir = stat.S_ISDIR(info.st_mode)
            size = info.st_size if stat.S_ISREG(info.st_mode) else 0
            entries.append((child.name, is_dir, size))
        return sorted(entries, key=lambda e: (not e[1], e[0]))

    def files_under(self, relative: str | Path, limit: int = 200) -> list[str]:
        """Regular files under a folder of the run, relative to that folder, sorted (at most
        `limit`); links and special files are left out."""
        return regular_files_under(self.root, relative, limit)
