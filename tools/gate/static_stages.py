"""The stages that read files only: `lint` and `dedup` (MinHash near-duplicates of pool tasks).
`decontam` (13-gram overlap with a held-out benchmark) lives in tools/gate/decontam.py."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from ..tasks.format import TaskFormatError, load_pool, load_task
from ..tasks.similarity import DedupIndex, task_text
from .config import GateConfig, StageName
from .gpu import gpu_lint_result
from .lint import lint_task
from .network import network_need
from .results import StageResult, excerpt

Prior = Mapping[StageName, StageResult]

#: Most characters of a candidate's text (instruction, tests, solution) dedup compares: shingling
#: costs memory per word, and the start of a task says what it is.
MAX_DEDUP_CHARS = 2_000_000


async def lint(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    report = await asyncio.to_thread(
        lint_task, task, backend=config.backend, needs_solution="oracle" not in config.skip
    )
    gpu = gpu_lint_result(task, report, config.backend)
    if gpu is not None:
        return gpu
    need = await asyncio.to_thread(network_need, task, allow_internet=config.allow_internet)
    details = {
        "findings": [f.model_dump() for f in report.findings],
        "network": need.model_dump() | {"granted": need.granted},
    }
    if report.ok:
        warned = f" ({len(report.warnings)} warnings)" if report.warnings else ""
        return StageResult(
            stage="lint",
            passed=True,
            reason=f"no lint errors{warned}",
            details=details,
            excerpt=excerpt(report.summary()),
        )
    errors = report.errors
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return StageResult(
        stage="lint",
        passed=False,
        reason=f"{errors[0]}{more}",
        details=details,
        excerpt=excerpt(report.summary()),
    )


def _fingerprint(path: Path) -> tuple[str, float]:
    """A cache key that changes when files are added to or removed from a folder."""
    try:
        return str(path.resolve()), path.stat().st_mtime
    except OSError:
        return str(path), -1.0


# --------------------------------------------------------------------------- dedup


def _pool_key(pool: Path) -> tuple[tuple[str, float], ...]:
    """The pool's task folders and their mtimes: the index is rebuilt when the pool changes."""
    try:
        children = sorted(p for p in pool.iterdir() if p.is_dir())
    except OSError:
        return ()
    return tuple(_fingerprint(p) for p in children)


@lru_cache(maxsize=4)
def _pool_index(
    pool: str, key: tuple[tuple[str, float], ...], threshold: float
) -> tuple[DedupIndex, int]:
    errors: list[TaskFormatError] = []
    index = DedupIndex.of_pool(load_pool(pool, errors), threshold=threshold)
    return index, len(errors)


async def dedup(task: Path, config: GateConfig, prior: Prior) -> StageResult:
    if config.pool_dir is None:
        return StageResult.skip("dedup", "no task pool configured (GateConfig.pool_dir)")
    if not config.pool_dir.is_dir():
        return StageResult.infrastructure(
            "dedup", f"task pool {config.pool_dir} does not exist; fix GateConfig.pool_dir"
        )
    pool = str(config.pool_dir.resolve())
    index, unreadable = await asyncio.to_thread(
        _pool_index, pool, _pool_key(config.pool_dir), config.dedup_threshold
    )
    loaded = load_task(task)
    text = await asyncio.to_thread(task_text, loaded)
    match = index.closest(text[:MAX_DEDUP_CHARS], exclude=str(loaded.root))
    details = {
        "pool_size": len(index),
        "unreadable_pool_tasks": unreadable,
        "threshold": config.dedup_threshold,
        "closest": match.model_dump() if match else None,
    }
    if match is None:
        return StageResult(
            stage="dedup", passed=True, details=details, reason="the pool holds no other task"
        )
    name = Path(match.key).name
    if not match.duplicate:
        return StageResult(
            stage="dedup",
            passed=True,
            details=details,
            reason=f"closest pool task {name} has similarity "
            f"{match.similarity:.2f} < {config.dedup_threshold:.2f}",
        )
    return StageResult(
        stage="dedup",
        passed=False,
        details=details,
        reason=f"near-duplicate of pool task {name}: MinHash similarity {match.similarity:.2f} "
        f">= {config.dedup_threshold:.2f} over instruction, tests and solution; change what the "
        "task asks for (not just its wording) or drop it",
    )
