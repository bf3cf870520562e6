"""The task pool: admitted Harbor task folders plus a small JSON index of their state.

Adding a task copies its folder under a temporary name and renames it into place, and the index is
replaced atomically, so a run killed at any moment leaves either the old or the new pool, never a
half one; adding the same task id twice is a no-op (a resumed run does not duplicate).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import statistics
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..stats import Rate, Verdict, band_verdict, rate, samples_to_decide
from .format import TaskFormatError, load_task
from .limits import inventory
from .snapshot import content_hash

Status = Literal["active", "retired"]


class PoolError(RuntimeError):
    """The pool refused a change (e.g. bytes that are not the ones admitted)."""


class EvalPoint(BaseModel):
    round: int
    mean_reward: float
    n: int


class PoolEntry(BaseModel):
    task_id: str
    category: str = ""
    difficulty: str = ""
    source: Literal["seed", "proposed"] = "proposed"
    admitted_round: int = 0
    status: Status = "active"
    retired_round: int | None = None
    retired_reason: str | None = None
    content_hash: str | None = Field(
        default=None,
        description="Hash of the admitted bytes (tools/tasks/snapshot.py); the verdict names it.",
    )
    history: list[EvalPoint] = Field(default_factory=list)

    @property
    def last_mean(self) -> float | None:
        return self.history[-1].mean_reward if self.history else None


class PoolCopyError(PoolError):
    """A task folder could not be copied into the pool; the message says why (task's fault)."""


class PoolIndex(BaseModel):
    entries: dict[str, PoolEntry] = Field(default_factory=dict)


class Pool:
    """`root/<task_id>/` task folders and `root/pool.json`."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self._index_path = self.root / "pool.json"

    @contextmanager
    def _locked(self) -> Iterator[PoolIndex]:
        with open(self.root / ".pool.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent admit nodes write the same index
            index = self.load()
            yield index
            tmp = self._index_path.with_suffix(f".{uuid.uuid4().hex[:6]}.tmp")
            tmp.write_text(index.model_dump_json(indent=2))
            os.replace(tmp, self._index_path)

    def load(self) -> PoolIndex:
        if not self._index_path.exists():
            return PoolIndex()
        return PoolIndex.model_validate_json(self._index_path.read_text())

    def entries(self, status: Status | None = None) -> list[PoolEntry]:
        items = self.load().entries.values()
        return sorted(
            (e for e in items if status is None or e.status == status), key=lambda e: e.task_id
        )

    def path(self, task_id: str) -> Path:
        return self.root / task_id

    def add(self, source_dir: Path, entry: PoolEntry) -> PoolEntry:
        """Copy a task folder into the pool under `entry.task_id` (idempotent)."""
        target = self.path(entry.task_id)
        with self._locked() as index:
            if entry.task_id in index.entries and target.exists():
                return index.entries[entry.task_id]
            if not target.exists():
                tmp = self.root / f".{entry.task_id}.{uuid.uuid4().hex[:6]}.tmp"
                _copy_task(Path(source_dir), tmp)
                if entry.content_hash is not None and content_hash(tmp) != entry.content_hash:
                    shutil.rmtree(tmp, ignore_errors=True)
                    raise PoolCopyError(
                        f"{source_dir} changed between admission and copy: the pool takes only "
                        f"the admitted bytes ({entry.content_hash})"
                    )
                os.replace(tmp, target)
            index.entries[entry.task_id] = entry
            return entry

    def sweep(self) -> list[str]:
        """Remove temporary copies a killed run left behind (`.<id>.<hex>.tmp`)."""
        removed = []
        for leftover in self.root.glob(".*.tmp"):
            if leftover.is_dir() and not leftover.is_symlink():
                shutil.rmtree(leftover, ignore_errors=True)
                removed.append(leftover.name)
        return removed

    def record_eval(self, task_id: str, round_: int, rewards: list[float]) -> PoolEntry:
        with self._locked() as index:
            entry = index.entries[task_id]
            entry.history = [p for p in entry.history if p.round != round_]
            entry.history.append(
                EvalPoint(round=round_, mean_reward=statistics.fmean(rewards), n=len(rewards))
            )
            return entry

    def retire(self, task_id: str, round_: int, reason: str) -> None:
        """Mark out of use; the folder stays on disk for inspection and later reuse."""
        with self._locked() as index:
            entry = index.entries[task_id]
            entry.status, entry.retired_round, entry.retired_reason = "retired", round_, reason

    def seed_from(self, seed_dir: Path) -> int:
        """Start the pool from a folder of tasks (the static seed pool). Returns how many added."""
        added = 0
        for folder in sorted(p for p in Path(seed_dir).iterdir() if (p / "task.toml").exists()):
            try:
                task = load_task(folder)
            except TaskFormatError:
                continue
            try:
                self.add(
                    folder,
                    PoolEntry(
                        task_id=folder.name,
                        category=task.category or "",
                        difficulty=task.difficulty or "",
                        source="seed",
                    ),
                )
            except PoolCopyError:
                continue
            added += 1
        return added


class BandDecision(BaseModel):
    """What one refresh's samples say about a pool task against the difficulty band
    (tools/stats.py: retire only when the whole 95% interval lies outside the band)."""

    rate: Rate
    verdict: Verdict
    band: tuple[float, float]
    samples_to_decide: int | None = Field(
        default=None,
        description="Total samples at which the observed rate, if it held, would retire the "
        "task; None when the rate lies in the band (more samples could only confirm it).",
    )

    @property
    def retire(self) -> bool:
        return self.verdict in ("too_hard", "too_easy")

    @property
    def pending(self) -> bool:
        """The observed rate lies outside the band but the interval does not: kept, unproven."""
        return not self.retire and not self.band[0] <= self.rate.mean <= self.band[1]

    def reason(self) -> str:
        low, high = self.band
        side = "below" if self.verdict == "too_hard" else "above"
        if self.retire:
            return f"solver success {self.rate} lies wholly {side} the band [{low:g}, {high:g}]"
        more = (
            f"; {self.samples_to_decide - self.rate.n} more sample(s) at this rate would decide"
            if self.samples_to_decide is not None
            else ""
        )
        return f"solver success {self.rate} overlaps the band [{low:g}, {high:g}]: kept{more}"


def band_decision(rewards: list[float], band: tuple[float, float]) -> BandDecision:
    """The retirement rule of the refresh: the interval of `rewards` against `band`."""
    measured = rate(rewards)
    return BandDecision(
        rate=measured,
        verdict=band_verdict(measured, band),
        band=band,
        samples_to_decide=samples_to_decide(measured, band),
    )


def _copy_task(source: Path, tmp: Path) -> None:
    """Copy a task folder to `tmp`, refusing anything but regular files and folders (a FIFO
    would block the copy, a device would never end it); nothing is left behind on failure."""
    problems = inventory(source)
    if problems:
        first = problems[0]
        raise PoolCopyError(f"{first.file}: {first.problem}")

    def copy_regular(src: str, dst: str) -> None:
        if not os.path.isfile(src) or os.path.islink(src):  # changed since the inventory
            raise PoolCopyError(f"{os.path.relpath(src, source)} is not a regular file")
        shutil.copy2(src, dst)

    try:
        shutil.copytree(source, tmp, symlinks=True, copy_function=copy_regular)
    except (OSError, shutil.Error, PoolCopyError) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if isinstance(exc, PoolCopyError):
            raise
        raise PoolCopyError(f"the task folder could not be copied: {type(exc).__name__}") from None
