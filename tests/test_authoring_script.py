"""The cold start's scripted proposer writes each seed file so that the episode loop's own parser
reads back exactly that file (blocks), or the filesystem tool's arguments hold it (calls)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenvscaling.graphs.proposer.replay import (
    NotAuthorableError,
    authoring_files,
    authoring_script,
)
from autoenvscaling.tools.tasks.file_blocks import read_file_blocks

from .conftest import REPO


def _authorable(task: Path) -> bool:
    try:
        return bool(authoring_files(task))
    except NotAuthorableError:  # a file over MAX_FILE_CHARS: the cold start drops it, by design
        return False


#: The embedded cold start's tasks (the starter pool) and every seed a reply can hold.
SEEDS = sorted(
    p
    for pool in ("starter", "seed")
    for p in (REPO / "tasks" / pool).iterdir()
    if (p / "task.toml").is_file() and _authorable(p)
)


@pytest.mark.parametrize("task", SEEDS, ids=lambda p: p.name)
def test_each_block_reads_back_as_the_file(task: Path) -> None:
    files = authoring_files(task)
    script = authoring_script(task, "file_blocks")
    writes, rest = script[: len(files)], script[len(files) :]
    for (rel, text), message in zip(files, writes, strict=True):
        assert message.tool_calls == []
        assert read_file_blocks(message.text) == {rel: text.rstrip("\n") + "\n"}
    assert [m.tool_calls[0]["name"] for m in rest][-1] == "submit"
    assert {m.tool_calls[0]["name"] for m in rest} <= {"check", "run", "submit"}


def test_the_call_form_carries_each_file_as_an_argument() -> None:
    task = SEEDS[0]
    files = authoring_files(task)
    calls = [m.tool_calls[0] for m in authoring_script(task, "write_file")[: len(files)]]
    assert [(c["name"], c["args"]["path"], c["args"]["content"]) for c in calls] == [
        ("write_file", rel, text) for rel, text in files
    ]
