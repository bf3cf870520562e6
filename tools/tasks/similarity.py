"""Text similarity for the gate: `decontam` (13-gram overlap with held-out instructions) and
`dedup` (MinHash near-duplicates of pool tasks, via datasketch).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

from datasketch import MinHash, MinHashLSH
from pydantic import BaseModel, Field

from .format import HarborTask

__all__ = [
    "DedupIndex",
    "DedupMatch",
    "HeldoutIndex",
    "NgramMatch",
    "load_heldout",
    "ngram_overlap",
    "task_text",
    "words",
]

_WORD = re.compile(r"\w+")
_TASK_MARKERS = ("instruction.md", "task.toml")


def words(text: str) -> list[str]:
    """Normalised word tokens: lower case, runs of letters/digits/underscore (Unicode-aware)."""
    return _WORD.findall(text.lower())


def _ngrams(tokens: list[str], n: int) -> Iterable[tuple[str, ...]]:
    return (tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


# --------------------------------------------------------------------------- decontam


class NgramMatch(BaseModel):
    heldout: str = Field(description="key of the held-out item (its task folder or file)")
    ngram: str = Field(description="the first shared n-gram, as normalised words")
    shared: int = Field(description="how many distinct n-grams the two texts share")


class HeldoutIndex:
    """n-gram -> held-out items, built once and queried per candidate."""

    def __init__(self, heldout: Mapping[str, str], n: int = 13):
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n}")
        self.n = n
        self.size = len(heldout)
        self._index: dict[tuple[str, ...], set[str]] = {}
        for key, text in heldout.items():
            for gram in _ngrams(words(text), n):
                self._index.setdefault(gram, set()).add(key)

    def overlap(self, text: str) -> list[NgramMatch]:
        """One match per held-out item sharing an n-gram with `text`, most shared first."""
        first: dict[str, tuple[str, ...]] = {}
        counts: dict[str, int] = {}
        for gram in dict.fromkeys(_ngrams(words(text), self.n)):  # distinct, in text order
            for key in self._index.get(gram, ()):
                first.setdefault(key, gram)
                counts[key] = counts.get(key, 0) + 1
        matches = [
            NgramMatch(heldout=key, ngram=" ".join(gram), shared=counts[key])
            for key, gram in first.items()
        ]
        return sorted(matches, key=lambda m: (-m.shared, m.heldout))


def ngram_overlap(text: str, heldout_texts: Mapping[str, str], n: int = 13) -> list[NgramMatch]:
    """Held-out items sharing at least one word n-gram with `text` (empty list: clean)."""
    return HeldoutIndex(heldout_texts, n).overlap(text)


def load_heldout(path: Path | str) -> dict[str, str]:
    """Held-out texts under `path`: each task folder's instruction.md, plus loose .md/.txt files.

    Keys are paths relative to `path` (the task folder for instructions). Files inside a task
    folder other than instruction.md (READMEs, test data) are not instructions and are skipped.
    """
    root = Path(path)
    if root.is_file():
        return {root.name: root.read_text(encoding="utf-8", errors="replace")}
    if not root.is_dir():
        raise FileNotFoundError(
            f"{root}: held-out folder does not exist; point it at a folder of task folders "
            "or of .md/.txt files"
        )
    task_dirs = {p.parent for marker in _TASK_MARKERS for p in root.rglob(marker)}
    out: dict[str, str] = {}
    for file in sorted(root.rglob("*")):
        if not file.is_file() or file.suffix.lower() not in (".md", ".txt"):
            continue
        owner = next((d for d in task_dirs if file.is_relative_to(d)), None)
        if owner is not None:
            if file != owner / "instruction.md":
                continue
            key = owner.relative_to(root).as_posix() if owner != root else root.name
        else:
            key = file.relative_to(root).as_posix()
        out[key] = file.read_text(encoding="utf-8", errors="replace")
    return out


# --------------------------------------------------------------------------- dedup

_BATCH = 2048  # shingles hashed at once: 2048 x 128 permutations x 8 bytes = 2 MB


def _shingles(text: str, size: int) -> Iterator[bytes]:
    """Word `size`-grams of `text` as bytes, streamed; a text shorter than `size` words is one
    shingle of all its words, an empty one the empty shingle."""
    window: deque[str] = deque(maxlen=size)
    seen = 0
    for match in _WORD.finditer(text.lower()):
        window.append(match.group())
        seen += 1
        if seen >= size:
            yield " ".join(window).encode()
    if seen < size:
        yield " ".join(window).encode()


def task_text(task: HarborTask) -> str:
    """What dedup compares: the instruction, then every text file of tests/ and solution/."""
    parts = [task.instruction]
    for folder in (task.tests_dir, task.solution_dir):
        if folder is None or not folder.is_dir():
            continue
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            try:
                parts.append(file.read_text(encoding="utf-8"))
            except UnicodeDecodeError:
                continue  # binary fixtures carry no wording
    return "\n".join(parts)


class DedupMatch(BaseModel):
    key: str = Field(description="the pool task (its folder path)")
    similarity: float = Field(description="MinHash estimate of the Jaccard similarity")
    duplicate: bool = Field(description="similarity >= the index threshold")


class DedupIndex:
    """Near-duplicate search over a task pool: MinHash of word shingles + LSH (datasketch)."""

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, shingle: int = 5):
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"threshold must be in (0, 1], got {threshold}")
        self.threshold = threshold
        self.num_perm = num_perm
        self.shingle = shingle
        self._lsh = MinHashLSH(threshold=threshold, num_perm=num_perm)
        self._hashes: dict[str, MinHash] = {}

    def __len__(self) -> int:
        return len(self._hashes)

    def __contains__(self, key: str) -> bool:
        return key in self._hashes

    def minhash(self, text: str) -> MinHash:
        """MinHash of the text's word shingles, streamed in batches.

        A minimum ignores repeats, so shingles go in as they come, a batch at a time: memory
        stays at one batch x num_perm hashes however long the text (a 21 MB instruction took
        3.2 GB when all shingles went into one `update_batch` matrix).
        """
        m = MinHash(num_perm=self.num_perm, seed=1)
        batch: list[bytes] = []
        for shingle in _shingles(text, self.shingle):
            batch.append(shingle)
            if len(batch) >= _BATCH:
                m.update_batch(batch)
                batch.clear()
        if batch:
            m.update_batch(batch)
        return m

    def add(self, key: str, text: str) -> None:
        if key in self._hashes:
            self._lsh.remove(key)
        m = self.minhash(text)
        self._hashes[key] = m
        self._lsh.insert(key, m)

    def add_task(self, task: HarborTask) -> None:
        self.add(str(task.root), task_text(task))

    def closest(self, text: str, *, exclude: str | None = None) -> DedupMatch | None:
        """The most similar pool entry (None for an empty pool); `duplicate` says if it is one.

        LSH finds the candidates above the threshold; when there are none, a linear scan
        still reports the closest entry so a verdict can say how far the task is from the pool.
        """
        m = self.minhash(text)
        keys = [str(k) for k in self._lsh.query(m) if k != exclude]  # keys are task ids
        if not keys:
            keys = [k for k in self._hashes if k != exclude]
        if not keys:
            return None
        best = max(sorted(keys), key=lambda k: m.jaccard(self._hashes[k]))
        similarity = float(m.jaccard(self._hashes[best]))
        return DedupMatch(key=best, similarity=similarity, duplicate=similarity >= self.threshold)

    @classmethod
    def of_pool(
        cls,
        tasks: Iterable[HarborTask],
        threshold: float = 0.8,
        num_perm: int = 128,
        shingle: int = 5,
    ) -> DedupIndex:
        index = cls(threshold=threshold, num_perm=num_perm, shingle=shingle)
        for task in tasks:
            index.add_task(task)
        return index
