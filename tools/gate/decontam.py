"""The `decontam` stage: no word 13-gram shared with a held-out benchmark's instructions.

Sources (`GateConfig.heldout_dirs`, the run's repeatable `--decontam PATH`) are folders of Harbor
tasks (each task's instruction.md; loose .md/.txt files count too) or a prepared index file written
by `build_index(...).save(path)`. A folder's index is built once and cached on disk, keyed by the
folder's path, n and a fingerprint of its instruction files (path, size, mtime): a changed
benchmark is re-indexed, an unchanged one is loaded in milliseconds.

With no source configured the stage result says **not configured** (`details.status`): it lets
the task through, because decontamination is the user's choice, but it never says "passed" and
the verdict lists the stage under `not_configured`, so reports can say it did not run.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, Field

from ..tasks.format import load_task
from ..tasks.similarity import load_heldout, words
from .config import GateConfig, StageName
from .results import NOT_CONFIGURED_STATUS, StageResult

Prior = Mapping[StageName, StageResult]

NOT_CONFIGURED = NOT_CONFIGURED_STATUS
INDEX_FORMAT = "autoenvscaling-decontam-index/1"
NOT_CONFIGURED_REASON = (
    "not configured: no held-out benchmark was given (--decontam PATH), so decontamination did "
    "not run; this candidate was NOT checked against any benchmark"
)


class DecontamError(ValueError):
    """A held-out source is missing or unreadable: the user's configuration, not the task."""


def _gram_key(gram: Iterable[str]) -> str:
    # 12 hex chars of blake2b: ~2^48 space, so a false match in a 10^6-gram index is ~10^-8.
    return hashlib.blake2b(" ".join(gram).encode(), digest_size=6).hexdigest()


def _grams(text: str, n: int) -> list[tuple[str, ...]]:
    tokens = words(text)
    return [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]


class DecontamMatch(BaseModel):
    heldout: str = Field(description="The held-out item (source/task) sharing n-grams.")
    ngram: str = Field(description="The candidate's first shared n-gram, as normalised words.")
    shared: int = Field(description="Distinct n-grams the candidate shares with it.")


class DecontamIndex(BaseModel):
    """Hashed n-grams of held-out instructions -> the items holding them (JSON on disk)."""

    format: str = INDEX_FORMAT
    n: int
    sources: list[str] = Field(default_factory=list)
    items: list[str] = Field(default_factory=list)
    grams: dict[str, list[int]] = Field(default_factory=dict)

    @classmethod
    def from_texts(cls, texts: Mapping[str, str], n: int, sources: list[str]) -> DecontamIndex:
        index = cls(n=n, sources=sources, items=sorted(texts))
        for i, key in enumerate(index.items):
            for gram in {_gram_key(g) for g in _grams(texts[key], n)}:
                index.grams.setdefault(gram, []).append(i)
        return index

    def merge(self, other: DecontamIndex) -> DecontamIndex:
        if other.n != self.n:
            raise DecontamError(f"cannot merge a {other.n}-gram index into a {self.n}-gram one")
        merged = self.model_copy(deep=True)
        offset = len(merged.items)
        merged.items += other.items
        merged.sources += other.sources
        for gram, ids in other.grams.items():
            merged.grams.setdefault(gram, []).extend(i + offset for i in ids)
        return merged

    def overlap(self, text: str) -> list[DecontamMatch]:
        first: dict[int, tuple[str, ...]] = {}
        counts: dict[int, int] = {}
        for gram in dict.fromkeys(_grams(text, self.n)):  # distinct, in text order
            for item in self.grams.get(_gram_key(gram), ()):
                first.setdefault(item, gram)
                counts[item] = counts.get(item, 0) + 1
        matches = [
            DecontamMatch(heldout=self.items[i], ngram=" ".join(g), shared=counts[i])
            for i, g in first.items()
        ]
        return sorted(matches, key=lambda m: (-m.shared, m.heldout))

    def save(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(self.model_dump_json())
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, path: Path) -> DecontamIndex:
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DecontamError(f"{path}: not a readable decontamination index ({exc})") from exc
        if not isinstance(data, dict) or data.get("format") != INDEX_FORMAT:
            raise DecontamError(
                f"{path}: not a decontamination index (expected format {INDEX_FORMAT}); pass a "
                "folder of Harbor tasks or a file written by DecontamIndex.save"
            )
        return cls.model_validate(data)


def cache_dir() -> Path:
    root = os.environ.get("AUTOENVSCALING_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "autoenvscaling"
    )
    return Path(root) / "decontam"


def _fingerprint(folder: Path, n: int) -> str:
    digest = hashlib.sha256(f"{folder.resolve()}|{n}".encode())
    for file in sorted(folder.rglob("*")):
        if file.is_file() and file.suffix.lower() in (".md", ".txt"):
            stat = file.stat()
            digest.update(f"{file.relative_to(folder)}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:24]


def index_for(source: Path, n: int) -> DecontamIndex:
    """The index of one source: loaded (a prepared index file) or built once and cached."""
    source = Path(source)
    if not source.exists():
        raise DecontamError(
            f"held-out source {source} does not exist; point --decontam at a folder of Harbor "
            "tasks (e.g. a Terminal-Bench checkout) or a prepared index file"
        )
    if source.is_file() and source.suffix == ".json":
        index = DecontamIndex.load(source)
        if index.n != n:
            raise DecontamError(f"{source} is a {index.n}-gram index; the gate checks {n}-grams")
        return index
    cached = cache_dir() / f"{_fingerprint(source, n) if source.is_dir() else source.name}.json"
    if source.is_dir() and cached.is_file():
        try:
            return DecontamIndex.load(cached)
        except DecontamError:
            pass  # a damaged cache file is rebuilt
    name = source.resolve().name
    texts = {f"{name}/{k}": v for k, v in load_heldout(source).items()}
    index = DecontamIndex.from_texts(texts, n, [str(source.resolve())])
    if source.is_dir():
        index.save(cached)
    return index


@lru_cache(maxsize=8)
def _combined(sources: tuple[str, ...], n: int, stamp: tuple[str, ...]) -> DecontamIndex:
    indexes = [index_for(Path(s), n) for s in sources]
    combined = indexes[0]
    for other in indexes[1:]:
        combined = combined.merge(other)
    return combined


def combined_index(sources: list[Path], n: int) -> DecontamIndex:
    """Every source's index merged (memoised in-process; the disk cache holds each folder's)."""
    stamp = tuple(
        _fingerprint(s, n) if s.is_dir() else str(s.stat().st_mtime_ns if s.exists() else -1)
        for s in map(Path, sources)
    )
    return _combined(tuple(str(s) for s in sources), n, stamp)


def not_configured() -> StageResult:
    return StageResult(
        stage="decontam",
        passed=True,
        skipped=True,
        reason=NOT_CONFIGURED_REASON,
        details={"status": NOT_CONFIGURED},
    )


async def decontam(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    if not config.heldout_dirs:
        return not_configured()
    try:
        index = await asyncio.to_thread(combined_index, list(config.heldout_dirs), config.ngram)
    except DecontamError as exc:
        return StageResult.infrastructure("decontam", str(exc))
    matches = index.overlap(load_task(task).instruction)
    details = {
        "status": "checked",
        "heldout_items": len(index.items),
        "sources": index.sources,
        "n": config.ngram,
        "matches": [m.model_dump() for m in matches[:10]],
    }
    if not matches:
        return StageResult(
            stage="decontam",
            passed=True,
            details=details,
            reason=f"no {config.ngram}-gram shared with {len(index.items)} held-out instructions",
        )
    top = matches[0]
    others = f" and {len(matches) - 1} more held-out item(s)" if len(matches) > 1 else ""
    return StageResult(
        stage="decontam",
        passed=False,
        details=details,
        reason=f"instruction.md shares {top.shared} {config.ngram}-gram(s) with the held-out "
        f'task {top.heldout}{others}, e.g. "{top.ngram}": reword the instruction in your own '
        "words (a held-out benchmark must not leak into training tasks)",
        excerpt=top.ngram,
    )
