"""decontam (13-gram overlap) and dedup (MinHash near-duplicates) over real task folders."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.tools.tasks.format import (
    HarborTask,
    TaskSpec,
    load_pool,
    load_task,
    write_task,
)
from autoenvscaling.tools.tasks.similarity import (
    DedupIndex,
    DedupMatch,
    HeldoutIndex,
    load_heldout,
    ngram_overlap,
    task_text,
    words,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOOD = FIXTURES / "good_task"
SEED = Path(__file__).resolve().parents[1] / "tasks" / "seed"

HELDOUT = (
    "Configure the nginx server so that requests to the /status endpoint return the number "
    "of active connections as plain text, and write the final configuration file to "
    "/etc/nginx/conf.d/status.conf before restarting the service."
)


def _make_task(root: Path, name: str, instruction: str, check: str) -> Path:
    spec = TaskSpec(
        instruction=instruction,
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\n",
        tests={
            "test.sh": "#!/bin/bash\n"
            f"if {check}; then echo 1 > /logs/verifier/reward.txt; "
            "else echo 0 > /logs/verifier/reward.txt; fi\n"
        },
    )
    return write_task(spec, root / name).root


def closest_task(index: DedupIndex, task: HarborTask) -> DedupMatch | None:
    """What the gate's dedup stage asks: the closest pool entry other than the task itself."""
    return index.closest(task_text(task), exclude=str(task.root))


def test_words_normalise_case_and_punctuation():
    assert words("Hello, WORLD! it's /app/out.txt") == [
        "hello",
        "world",
        "it",
        "s",
        "app",
        "out",
        "txt",
    ]


def test_a_copied_13_gram_is_found_despite_case_and_punctuation():
    copied = (
        "Our task: REQUESTS to the `/status` endpoint return the number of active "
        "connections, as plain text -- and more."
    )
    matches = ngram_overlap(copied, {"tb/nginx-status": HELDOUT, "tb/other": "unrelated words"})
    assert [m.heldout for m in matches] == ["tb/nginx-status"]
    match = matches[0]
    assert (
        match.ngram
        == "requests to the status endpoint return the number of active connections as plain"
    )
    assert len(match.ngram.split()) == 13
    assert match.shared == 3  # the 13-grams ending "... plain", "... plain text", "... text and"


def test_twelve_shared_words_are_not_a_match():
    twelve = "requests to the status endpoint return the number of active connections as"
    assert len(words(twelve)) == 12
    assert ngram_overlap(twelve + " banana", {"h": HELDOUT}) == []
    assert ngram_overlap(twelve, {"h": HELDOUT}, n=12)[0].heldout == "h"


def test_index_ranks_items_by_shared_ngrams():
    index = HeldoutIndex({"long": HELDOUT, "short": " ".join(words(HELDOUT)[:14])}, n=13)
    matches = index.overlap(HELDOUT)
    assert [m.heldout for m in matches] == ["long", "short"]
    assert matches[0].shared > matches[1].shared == 2
    with pytest.raises(ValueError, match="n must be"):
        HeldoutIndex({}, n=0)


def test_load_heldout_reads_task_instructions_and_loose_files(tmp_path: Path):
    bench = tmp_path / "bench"
    shutil.copytree(GOOD, bench / "tasks" / "word-count")
    (bench / "tasks" / "word-count" / "README.md").write_text("not an instruction")
    (bench / "tasks" / "word-count" / "tests" / "notes.txt").write_text("test data")
    (bench / "extra.md").write_text(HELDOUT)
    (bench / "more").mkdir()
    (bench / "more" / "prompt.txt").write_bytes(b"caf\xe9 " + HELDOUT.encode())
    (bench / "ignored.json").write_text("{}")
    texts = load_heldout(bench)
    assert sorted(texts) == ["extra.md", "more/prompt.txt", "tasks/word-count"]
    assert texts["tasks/word-count"] == (GOOD / "instruction.md").read_text()
    assert texts["more/prompt.txt"].startswith("caf\ufffd")  # undecodable bytes do not stop it
    assert load_heldout(bench / "extra.md") == {"extra.md": HELDOUT}


def test_load_heldout_of_a_missing_folder(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="held-out folder does not exist"):
        load_heldout(tmp_path / "nope")


def test_decontam_flags_a_copied_task_instruction(tmp_path: Path):
    shutil.copytree(GOOD, tmp_path / "bench" / "word-count")
    heldout = load_heldout(tmp_path / "bench")
    candidate = "Please do this. " + (GOOD / "instruction.md").read_text()[50:400]
    matches = ngram_overlap(candidate, heldout)
    assert [m.heldout for m in matches] == ["word-count"]
    original = "Sort the lines of /app/data.txt numerically and write them to /app/sorted.txt."
    assert ngram_overlap(original, heldout) == []


def test_dedup_finds_a_lightly_edited_copy(tmp_path: Path):
    pool = tmp_path / "pool"
    shutil.copytree(GOOD, pool / "word-count")
    _make_task(pool, "sqlite-report", HELDOUT.replace("nginx", "sqlite"), "sqlite3 /app/db .tables")
    _make_task(
        pool, "git-tag", "Create an annotated git tag v1.0 in /app/repo.", "git -C /app/repo tag"
    )
    index = DedupIndex.of_pool(load_pool(pool))
    assert len(index) == 3

    copy = shutil.copytree(GOOD, tmp_path / "candidate")
    instruction = copy / "instruction.md"
    instruction.write_text(instruction.read_text().replace("three", "3").replace("single", "one"))
    match = closest_task(index, load_task(copy))
    assert match is not None and match.duplicate
    assert Path(match.key).name == "word-count"
    assert 0.8 <= match.similarity < 1.0


def test_dedup_reports_the_closest_even_when_not_a_duplicate(tmp_path: Path):
    pool = tmp_path / "pool"
    shutil.copytree(GOOD, pool / "word-count")
    _make_task(
        pool, "git-tag", "Create an annotated git tag v1.0 in /app/repo.", "git -C /app/repo tag"
    )
    index = DedupIndex.of_pool(load_pool(pool), threshold=0.8)
    fresh = load_task(
        _make_task(tmp_path, "new", "Create a lightweight git tag v2.0 in /app/repo.", "git tag")
    )
    match = closest_task(index, fresh)
    assert match is not None and not match.duplicate
    assert Path(match.key).name == "git-tag"
    assert 0.0 < match.similarity < 0.8


def test_dedup_excludes_the_task_itself_and_handles_an_empty_pool(tmp_path: Path):
    task = load_task(GOOD)
    index = DedupIndex()
    assert closest_task(index, task) is None
    index.add_task(task)
    assert str(task.root) in index
    assert closest_task(index, task) is None  # only itself in the pool
    assert index.closest(task_text(task)).similarity == 1.0
    index.add_task(task)  # re-adding replaces, never duplicates
    assert len(index) == 1


def test_dedup_is_deterministic_across_indexes():
    text = task_text(load_task(GOOD))
    a, b = DedupIndex(), DedupIndex()
    a.add("x", HELDOUT)
    b.add("x", HELDOUT)
    assert a.closest(text).similarity == b.closest(text).similarity
    with pytest.raises(ValueError, match="threshold"):
        DedupIndex(threshold=0)


def test_seed_tasks_are_not_near_duplicates_of_each_other():
    seeds = load_pool(SEED) if SEED.is_dir() else []
    if len(seeds) < 2:
        pytest.skip("tasks/seed has fewer than two tasks yet")
    index = DedupIndex.of_pool(seeds)
    for task in seeds:
        match = closest_task(index, task)
        assert match is not None and not match.duplicate, (task.name, match)
