"""tools/files/whole.py: a reader finds the old content or the new, never half."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from autoenvscaling.tools.files import whole
from autoenvscaling.tools.files.whole import write_whole


def _write_many(path: str, mark: str) -> None:
    for _ in range(200):
        write_whole(Path(path), mark * 50_000)


def test_concurrent_writers_each_leave_a_whole_file(tmp_path: Path):
    path = tmp_path / "kept.json"
    write_whole(path, "o" * 50_000)
    writers = [
        multiprocessing.get_context("spawn").Process(target=_write_many, args=(str(path), m))
        for m in "ab"
    ]
    for writer in writers:
        writer.start()
    seen = set()
    while any(writer.is_alive() for writer in writers):
        text = path.read_text()
        assert len(text) == 50_000 and len(set(text)) == 1, (len(text), set(text))
        seen.add(text[0])
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    assert path.read_text()[0] in "ab" and seen
    assert [p.name for p in tmp_path.iterdir()] == ["kept.json"]  # no partial file left


def test_a_failed_write_keeps_the_old_content_and_leaves_nothing(tmp_path: Path, monkeypatch):
    path = tmp_path / "point.json"
    write_whole(path, "old")

    def no_rename(*_args: object) -> None:
        raise OSError("rename refused")

    monkeypatch.setattr(whole.os, "replace", no_rename)
    with pytest.raises(OSError, match="rename refused"):
        write_whole(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["point.json"]  # the partial file went too
