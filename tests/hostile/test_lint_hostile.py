"""Lint and the pool against the hostile corpus, in process (no sandbox): fast, bounded, specific.

Stated limits (TaskLimits defaults): lint of any folder reads nothing before one `lstat` walk
that stops after 2,000 entries; a 10,000-file task or a 2 GB sparse file is judged in under
2 s without reading it.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time

import pytest

from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.gate.results import scrub_paths
from autoenvscaling.tools.scratch import make_scratch, sweep_scratch
from autoenvscaling.tools.tasks.format import TaskFormatError, load_task
from autoenvscaling.tools.tasks.pool import Pool, PoolCopyError, PoolEntry

from .corpus import CASES, GOOD, make_corpus


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("lint-corpus"))


@pytest.mark.timeout(120)
def test_lint_rejects_every_static_case_with_a_specific_reason(corpus):
    started = time.monotonic()
    wrong = []
    for name, (case, path) in corpus.items():
        if case.stage != "lint":
            continue
        report = lint_task(path)
        if report.ok:
            wrong.append(f"{name}: passed lint")
            continue
        first = report.errors[0]
        text = scrub_paths(str(first), path)
        missing = [w for w in case.words if w not in text]
        if missing or str(path.parent) in text:
            wrong.append(f"{name}: missing {missing} in {text!r}")
    assert not wrong, "\n".join(wrong)
    assert time.monotonic() - started < 60


def test_the_control_task_passes_and_the_corpus_is_large():
    assert lint_task(GOOD).ok
    assert len(CASES) >= 40
    assert sum(case.trial for case in CASES) >= 8


@pytest.mark.timeout(60)
def test_lint_is_bounded_on_huge_inputs(tmp_path):
    many = tmp_path / "many"
    (many / "environment").mkdir(parents=True)
    for i in range(10_000):
        (many / "environment" / f"{i}.txt").write_bytes(b"")
    sparse = tmp_path / "sparse"
    sparse.mkdir()
    with open(sparse / "instruction.md", "wb") as handle:
        handle.truncate(2_000_000_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for folder, words in ((many, "more than 2000"), (sparse, "2,000,000,000 bytes")):
        started = time.monotonic()
        report = lint_task(folder)
        assert time.monotonic() - started < 2
        assert not report.ok and words in report.errors[0].message
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 100


def test_load_task_refuses_what_lint_refuses(corpus):
    _, fifo = corpus["fifo-in-tests"]
    with pytest.raises(TaskFormatError, match="FIFO"):
        load_task(fifo)


def test_pool_copy_refuses_special_files_and_leaves_nothing(corpus, tmp_path):
    pool = Pool(tmp_path / "pool")
    for name in ("fifo-in-tests", "socket-in-solution", "symlink-dir-out"):
        _, task = corpus[name]
        with pytest.raises(PoolCopyError):
            pool.add(task, PoolEntry(task_id=name))
    assert sorted(p.name for p in (tmp_path / "pool").iterdir()) == [".pool.lock"]
    assert pool.entries() == []
    # A half-copied folder a killed run left behind is swept at the next start.
    (tmp_path / "pool" / ".r01-x.abc123.tmp").mkdir()
    assert pool.sweep() == [".r01-x.abc123.tmp"]
    good = pool.add(GOOD, PoolEntry(task_id="good"))
    assert good.task_id == "good" and (tmp_path / "pool" / "good" / "task.toml").exists()
    assert not [p for p in (tmp_path / "pool").iterdir() if p.name.endswith(".tmp")]
    assert os.listdir(tmp_path / "pool" / "good")


def test_scratch_of_a_dead_owner_is_swept_and_a_live_ones_kept(tmp_path):
    code = (
        "import sys, tempfile; tempfile.tempdir = sys.argv[1]; "
        "from autoenvscaling.tools.scratch import make_scratch; print(make_scratch('aes-gate-x-'))"
    )
    dead = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    old, tempfile.tempdir = tempfile.tempdir, str(tmp_path)
    try:
        live = make_scratch("aes-gate-y-")
    finally:
        tempfile.tempdir = old
    (tmp_path / "aes-gate-foreign").mkdir()  # no owner file: not ours to remove
    assert sweep_scratch("aes-gate-", tmp_path) == [os.path.basename(dead)]
    assert live.exists() and (tmp_path / "aes-gate-foreign").exists()
