"""Which of a task's five files a model's folder holds: what the graded proposer reward counts
below lint (an empty folder, blank files and links count as nothing written)."""

from __future__ import annotations

from pathlib import Path

from autoenvscaling.tools.tasks.task_files import TASK_FILES, written_task_files


def test_only_regular_files_with_content_count(tmp_path: Path) -> None:
    folder = tmp_path / "cand"
    assert written_task_files(folder) == []  # no folder at all
    (folder / "tests").mkdir(parents=True)
    (folder / "solution").mkdir()
    (folder / "instruction.md").write_text("Count the lines of /app/a.txt.\n")
    (folder / "task.toml").write_text("  \n\n")  # blank: not written
    (folder / "tests" / "test.sh").symlink_to("/etc/passwd")  # a link is never followed
    (folder / "solution" / "solve.sh").mkdir()  # a folder where a file belongs
    (folder / "environment").mkdir()
    assert written_task_files(folder) == ["instruction.md"]
    (folder / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    assert written_task_files(folder) == ["instruction.md", "environment/Dockerfile"]
    assert len(TASK_FILES) == 5
