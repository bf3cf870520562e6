"""The run folder as the viewer reads it: manifest, round history, pool, files — read-only.

Every reader tolerates a run that is still being written: a file not there yet is empty, a
file caught mid-write (the run replaces its files atomically, but a foreign one may not) reads
as missing rather than failing the page.
"""

from __future__ import annotations

import json
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.rollouts.models import RolloutStoreError
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.run_dir import Manifest, RunDir
from autoenvscaling.tools.tasks.pool import PoolIndex

#: The most of one file a page shows (the rest is named, not sent).
FILE_BYTES = 256 * 1024


class PathOutsideRun(ValueError):
    """A requested path does not resolve inside the run folder."""


class FileText(BaseModel):
    """A file of the run as text, cut at FILE_BYTES."""

    path: str
    text: str
    size: int
    truncated: bool
    binary: bool


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class RunFolder:
    """One run folder; `RunFolder(root)` never creates or changes anything in it."""

    def __init__(self, root: Path) -> None:
        self.layout = RunDir(root)
        self.root = self.layout.root

    # -- records --------------------------------------------------------------------------

    def manifest(self) -> Manifest | None:
        try:
            return self.layout.manifest()
        except (OSError, ValidationError, ValueError):
            return None

    def history(self) -> list[RoundMetrics]:
        """The finished rounds' metrics (reports/metrics.json), oldest first."""
        data = read_json(self.layout.reports / "metrics.json")
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
        try:
            return PoolIndex.model_validate_json((self.layout.pool / "pool.json").read_text())
        except (OSError, ValidationError, ValueError):
            return PoolIndex()

    def grpo_episode_rewards(self, round_: int) -> list[float] | None:
        """The scored rewards of the solver's GRPO episodes in a round (the training worker's
        result, train/rNN/result.json); None when the round trained no solver."""
        result = read_json(self.root / "train" / f"r{round_:02d}" / "result.json")
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
        try:
            return RolloutStore(self.layout.store, read_only=True)
        except RolloutStoreError:
            return None

    def store(self) -> RolloutStore | None:
        """The rollout store, read-only; None until the run has created it."""
        if "_store" in self.__dict__ and self.__dict__["_store"] is None:
            del self.__dict__["_store"]  # not there at first: look again
        return self._store

    # -- files ----------------------------------------------------------------------------

    def resolve(self, relative: str | Path) -> Path:
        """`relative` inside the run folder; refused when it (or a link on the way) leads out."""
        path = (self.root / relative).resolve()
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
        """The file's first `limit` bytes, or its last with `tail` (a log that grows)."""
        path = self.resolve(relative)
        size = path.stat().st_size
        with path.open("rb") as handle:
            if tail and size > limit:
                handle.seek(size - limit)
            data = handle.read(limit)
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
                is_dir = child.is_dir()
                size = 0 if is_dir else child.stat().st_size
            except OSError:
                continue
            entries.append((child.name, is_dir, size))
        return sorted(entries, key=lambda e: (not e[1], e[0]))

    def files_under(self, relative: str | Path, limit: int = 200) -> list[str]:
        """Files under a folder of the run, relative to that folder, sorted (at most `limit`)."""
        folder = self.resolve(relative)
        if not folder.is_dir():
            return []
        found = sorted(
            p.relative_to(folder).as_posix()
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )
        return found[:limit]
