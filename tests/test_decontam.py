"""Decontamination is real or loudly absent: a cached 13-gram index over a folder of Harbor tasks
(or a prepared index file), and "not configured" — never "passed" — when none is given."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.tools.gate import GateConfig, make_verdict, run_stage
from autoenvscaling.tools.gate import decontam as decontam_module
from autoenvscaling.tools.gate.decontam import DecontamIndex, index_for

from .conftest import FIXTURES

pytestmark = pytest.mark.timeout(60)

BENCH_TEXT = (
    "Write a script that reads the access log in /var/log/app.log and prints the ten most "
    "frequent client addresses together with their request counts sorted by count."
)


def _benchmark(root: Path) -> Path:
    """A Terminal-Bench-like folder: one Harbor task per folder, instruction.md in each."""
    for name, text in (("log-top-ten", BENCH_TEXT), ("other", "Unrelated words " * 20)):
        (root / name / "tests").mkdir(parents=True)
        (root / name / "instruction.md").write_text(text)
        (root / name / "task.toml").write_text('schema_version = "1.4"\n')
        (root / name / "tests" / "notes.md").write_text(BENCH_TEXT)  # not an instruction
    return root


def _candidate(tmp_path: Path, instruction: str) -> Path:
    task = tmp_path / "cand"
    shutil.copytree(FIXTURES / "good_task", task)
    (task / "instruction.md").write_text(instruction)
    return task


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOENVSCALING_CACHE_DIR", str(tmp_path / "cache"))
    decontam_module._combined.cache_clear()


async def test_not_configured_is_never_passed(tmp_path: Path) -> None:
    task = _candidate(tmp_path, "Sum the numbers in /app/numbers.txt into /app/sum.txt.\n")
    result = await run_stage("decontam", task, GateConfig())
    assert result.details["status"] == "not_configured" and "not configured" in result.reason
    assert "passed" not in result.reason and result.skipped
    verdict = make_verdict(task, [result])
    assert verdict.not_configured == ["decontam"]


async def test_overlap_with_the_benchmark_rejects(tmp_path: Path) -> None:
    bench = _benchmark(tmp_path / "bench")
    config = GateConfig(heldout_dirs=[bench])
    copied = _candidate(tmp_path, f"Your job: {BENCH_TEXT} Save it to /app/out.txt.\n")
    result = await run_stage("decontam", copied, config)
    assert not result.passed and "log-top-ten" in result.reason
    assert result.details["status"] == "checked" and result.details["heldout_items"] == 2
    (copied / "instruction.md").write_text("Sum the numbers in /app/numbers.txt, please.\n")
    clean = await run_stage("decontam", copied, config)
    assert clean.passed and not clean.skipped and "no 13-gram shared with 2" in clean.reason


async def test_index_is_built_once_and_cached(tmp_path: Path, monkeypatch) -> None:
    bench = _benchmark(tmp_path / "bench")
    first = index_for(bench, 13)
    cached = list((tmp_path / "cache" / "decontam").glob("*.json"))
    assert len(cached) == 1 and first.items == ["bench/log-top-ten", "bench/other"]

    def no_rebuild(*_a, **_k):
        raise AssertionError("the index was rebuilt although the benchmark did not change")

    monkeypatch.setattr(decontam_module, "load_heldout", no_rebuild)
    assert index_for(bench, 13).grams == first.grams  # from the cache
    # A changed benchmark is indexed again.
    (bench / "new").mkdir()
    (bench / "new" / "instruction.md").write_text("fresh task text " * 10)
    monkeypatch.undo()
    monkeypatch.setenv("AUTOENVSCALING_CACHE_DIR", str(tmp_path / "cache"))
    assert len(index_for(bench, 13).items) == 3


async def test_prepared_index_file_and_missing_source(tmp_path: Path) -> None:
    bench = _benchmark(tmp_path / "bench")
    prepared = index_for(bench, 13).save(tmp_path / "tb.index.json")
    shutil.rmtree(bench)  # the index alone is enough
    task = _candidate(tmp_path, f"{BENCH_TEXT}\n")
    result = await run_stage("decontam", task, GateConfig(heldout_dirs=[prepared]))
    assert not result.passed and "log-top-ten" in result.reason
    missing = await run_stage("decontam", task, GateConfig(heldout_dirs=[tmp_path / "nope"]))
    assert missing.infrastructure_error and "does not exist" in missing.reason
    assert DecontamIndex.load(prepared).n == 13
