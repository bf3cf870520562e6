"""The files a complete task holds (Harbor's layout, as the gate admits it), and which of them a
folder holds with content: the graded proposer reward's measure of a task that fails lint
(training/proposer/update.py), so that submitting an empty folder is not progress."""

from __future__ import annotations

from pathlib import Path

TASK_FILES: tuple[str, ...] = (
    "instruction.md",
    "task.toml",
    "environment/Dockerfile",
    "tests/test.sh",
    "solution/solve.sh",
)


def written_task_files(folder: Path | str) -> list[str]:
    """The TASK_FILES that `folder` holds as regular files with a non-blank byte (an empty
    file is not written). Links are not followed: a model's folder is never trusted."""
    root = Path(folder)
    written = []
    for name in TASK_FILES:
        path = root / name
        try:
            if path.is_symlink() or not path.is_file():
                continue
            with path.open("rb") as f:
                if f.read(65536).strip():
                    written.append(name)
        except OSError:
            continue
    return written
