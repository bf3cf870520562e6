"""The run's task splits and the check that they share nothing.

A run names up to three folders of Harbor tasks: the cold start's tasks (the SFT before round 1),
the pool's seed (what baseline, refresh, calibration and GRPO run on) and the held-out
evaluation set (measured, never trained on). A number read on the held-out split means something
only when no held-out task is, by content, one of the others. Three checks, each the gate's own:
- **same bytes**: the task folder's content hash (tools/tasks/snapshot.py), so a renamed copy
  is caught;
- **shared instruction 13-gram**: the `decontam` stage's check (tools/tasks/similarity.py);
- **near-duplicate**: the `dedup` stage's MinHash over instruction, tests and solution, at its
  threshold.
`check_splits` runs them over every pair of splits; `SplitCheck` is what the cold-start card,
the manifest and the reports name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations
from pathlib import Path

from pydantic import BaseModel, Field

from .format import TaskFormatError, load_task
from .similarity import DedupIndex, HeldoutIndex, task_text
from .snapshot import content_hash

#: The gate's defaults (tools/gate/config.py: `ngram`, `dedup_threshold`).
NGRAM = 13
NEAR_DUPLICATE = 0.8


def task_folders(folder: Path | str | None) -> list[Path]:
    """The task folders directly under `folder` (none for None, "" or a missing folder)."""
    if not folder:
        return []
    root = Path(folder)
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if (p / "task.toml").is_file())


class Overlap(BaseModel):
    """Two tasks of different splits that one check says are the same."""

    check: str = Field(description="same_bytes | shared_13gram | near_duplicate")
    first: str = Field(description="split/task")
    second: str = Field(description="split/task")
    detail: str = ""


class SplitInfo(BaseModel):
    name: str
    path: str
    tasks: int
    task_ids: list[str] = Field(default_factory=list)


class SplitCheck(BaseModel):
    """The splits a run names and whether any two share a task by content."""

    splits: list[SplitInfo] = Field(default_factory=list)
    overlaps: list[Overlap] = Field(default_factory=list)
    checks: list[str] = Field(
        default_factory=lambda: [
            "same_bytes (content hash)",
            f"shared_{NGRAM}gram (instruction.md, the gate's decontam)",
            f"near_duplicate (MinHash >= {NEAR_DUPLICATE}, the gate's dedup)",
        ]
    )

    @property
    def disjoint(self) -> bool:
        return not self.overlaps

    def shared_with(self, name: str) -> list[Overlap]:
        """The overlaps that involve split `name`."""
        return [o for o in self.overlaps if name in (_split(o.first), _split(o.second))]

    def summary(self) -> str:
        named = ", ".join(f"{s.name} {s.tasks} tasks ({s.path})" for s in self.splits)
        if self.disjoint:
            return f"disjoint, 0 shared: {named}"
        pairs = "; ".join(f"{o.check}: {o.first} ~ {o.second}" for o in self.overlaps[:5])
        more = f" and {len(self.overlaps) - 5} more" if len(self.overlaps) > 5 else ""
        return f"NOT DISJOINT, {len(self.overlaps)} shared ({pairs}{more}): {named}"


class _Task(BaseModel):
    key: str
    hash: str
    instruction: str
    text: str


def _split(key: str) -> str:
    return key.split("/", 1)[0]


def _read_one(split: str, path: Path) -> _Task | None:
    try:
        task = load_task(path)
    except TaskFormatError:
        return None  # not a task the run could use; the gate's lint says why elsewhere
    return _Task(
        key=f"{split}/{path.name}",
        hash=content_hash(path),
        instruction=task.instruction,
        text=task_text(task),
    )


def _read(split: str, folder: Path) -> list[_Task]:
    return [t for p in task_folders(folder) if (t := _read_one(split, p)) is not None]


def _pair(a: list[_Task], b: list[_Task]) -> list[Overlap]:
    found: list[Overlap] = []
    by_hash = {t.hash: t.key for t in a}
    for t in b:
        if t.hash in by_hash:
            found.append(Overlap(check="same_bytes", first=by_hash[t.hash], second=t.key))
    grams = HeldoutIndex({t.key: t.instruction for t in a}, NGRAM)
    for t in b:
        for match in grams.overlap(t.instruction):
            found.append(
                Overlap(
                    check=f"shared_{NGRAM}gram",
                    first=match.heldout,
                    second=t.key,
                    detail=f'{match.shared} shared, e.g. "{match.ngram}"',
                )
            )
    near = DedupIndex(threshold=NEAR_DUPLICATE)
    for t in a:
        near.add(t.key, t.text)
    for t in b:
        closest = near.closest(t.text)
        if closest is not None and closest.duplicate:
            found.append(
                Overlap(
                    check="near_duplicate",
                    first=closest.key,
                    second=t.key,
                    detail=f"similarity {closest.similarity:.2f}",
                )
            )
    return found


def check_splits(splits: Mapping[str, Path | str | None]) -> SplitCheck:
    """Every pair of the named splits (a None or missing folder is listed with 0 tasks)."""
    read: dict[str, list[_Task]] = {}
    infos = []
    for name, folder in splits.items():
        tasks = _read(name, Path(folder)) if folder else []
        read[name] = tasks
        infos.append(
            SplitInfo(
                name=name,
                path=str(folder) if folder else "none",
                tasks=len(tasks),
                task_ids=[t.key.split("/", 1)[1] for t in tasks],
            )
        )
    overlaps = [o for a, b in combinations(read, 2) for o in _pair(read[a], read[b])]
    return SplitCheck(splits=infos, overlaps=overlaps)


class SplitIndex:
    """The tasks of some folders, asked one candidate at a time (the generator's filter)."""

    def __init__(self, tasks: list[_Task]):
        self._tasks = tasks

    @classmethod
    def of_folders(cls, folders: Iterable[Path]) -> SplitIndex:
        return cls([t for f in folders for t in _read(Path(f).name, Path(f))])

    def clashes(self, task: Path) -> list[Overlap]:
        """What the task folder `task` shares with the indexed tasks (empty: nothing)."""
        one = _read_one("candidate", task)
        return _pair(self._tasks, [one]) if self._tasks and one else []


def require_disjoint(check: SplitCheck, of: str, against: Sequence[str]) -> None:
    """Raise `SplitOverlapError` when split `of` shares a task with any split in `against`."""
    bad = [o for o in check.shared_with(of) if {_split(o.first), _split(o.second)} & set(against)]
    if bad:
        raise SplitOverlapError(of, bad)


class SplitOverlapError(ValueError):
    def __init__(self, split: str, overlaps: list[Overlap]):
        self.split, self.overlaps = split, overlaps
        mine = {k for o in overlaps for k in (o.first, o.second) if _split(k) == split}
        pairs = dict.fromkeys((o.first, o.second) for o in overlaps)  # one per pair, any check
        shown = "; ".join(f"{a} ~ {b}" for a, b in list(pairs)[:5])
        more = f" and {len(pairs) - 5} more" if len(pairs) > 5 else ""
        super().__init__(
            f"the {split} tasks share {len(mine)} task(s) by content with another split "
            f"({shown}{more}; checks: {', '.join(sorted({o.check for o in overlaps}))}): a "
            "policy trained on them would be measured on what it was trained on; give folders "
            "that share nothing"
        )
