"""A task folder as text: the `<file path="...">` blocks a model reads tasks in and writes them back.

The brief shows example tasks in these blocks and the one-reply generation arms must answer in
them; `parse_file_blocks` turns such a reply back into a `TaskSpec` (every path checked: relative,
inside the task's folders, each file once).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from .format import TaskSpec
from ..text_cap import cap_text

_BLOCK = re.compile(r'<file path="([^"\n]+)">\n?(.*?)</file>', re.DOTALL)
_FOLDERS = ("environment/", "tests/", "solution/")


class ReplyFormatError(ValueError):
    """A reply's file blocks do not make a task folder; the message says what to change."""


def render_file_blocks(task_dir: Path | str, *, max_file_chars: int | None = None) -> str:
    """Every file of a task as `<file path="...">` blocks; `tests/` copies of environment files
    are named instead of repeated, and files over `max_file_chars` are excerpted (head + tail)."""
    root = Path(task_dir)
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    texts: dict[str, str] = {}
    for path in files:
        try:
            texts[path.relative_to(root).as_posix()] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    order = ["instruction.md", "task.toml", "environment/Dockerfile"]
    names = [n for n in order if n in texts] + [n for n in texts if n not in order]
    blocks, notes = [], []
    for name in names:
        text = texts[name]
        twin = f"environment/{name.removeprefix('tests/')}"
        if name.startswith("tests/") and texts.get(twin) == text:
            notes.append(f"({name} is an identical copy of {twin}, not shown again.)")
            continue
        if max_file_chars is not None:
            text = cap_text(text, max_file_chars).text
        blocks.append(f'<file path="{name}">\n{text.rstrip(chr(10))}\n</file>')
    return "\n".join(blocks + notes)


def cap_file_blocks(text: str, max_file_chars: int) -> str:
    """`<file>` blocks with each file's content capped at `max_file_chars` (head + tail)."""

    def cap(match: re.Match[str]) -> str:
        content = cap_text(match.group(2).rstrip("\n"), max_file_chars).text
        return f'<file path="{match.group(1)}">\n{content}\n</file>'

    return _BLOCK.sub(cap, text)


def read_file_blocks(text: str) -> dict[str, str]:
    """The `<file path="...">` blocks of a reply, path -> content (text outside is ignored);
    every path relative, inside the task's folders and given once, and at least one block."""
    files: dict[str, str] = {}
    for path, content in _BLOCK.findall(text):
        path = path.strip()
        pure = PurePosixPath(path)
        if pure.is_absolute() or ".." in pure.parts:
            raise ReplyFormatError(f'<file path="{path}">: use a path relative to the task folder')
        if path in files:
            raise ReplyFormatError(f'<file path="{path}"> appears twice: write each file once')
        if path not in ("instruction.md", "task.toml") and not path.startswith(_FOLDERS):
            raise ReplyFormatError(
                f'<file path="{path}">: a task holds instruction.md, task.toml and files under '
                "environment/, tests/ and solution/ only"
            )
        files[path] = content if content.endswith("\n") or not content else content + "\n"
    if not files:
        raise ReplyFormatError(
            'no <file path="..."> blocks found: write every file of the task as '
            '<file path="RELATIVE/PATH">CONTENT</file>'
        )
    return files


def parse_file_blocks(text: str) -> TaskSpec:
    """A task from a reply made of `<file path="...">` blocks (text outside them is ignored)."""
    files = read_file_blocks(text)
    missing = [p for p in ("instruction.md", "task.toml", "tests/test.sh") if p not in files]
    if missing:
        raise ReplyFormatError(f"missing file blocks for {', '.join(missing)}: a task needs them")

    def under(folder: str) -> dict[str, str | bytes]:
        return {
            p.removeprefix(folder): c
            for p, c in files.items()
            if p.startswith(folder) and p != "environment/Dockerfile"
        }

    return TaskSpec(
        instruction=files["instruction.md"],
        task_toml=files["task.toml"],
        dockerfile=files.get("environment/Dockerfile"),
        environment_files=under("environment/"),
        tests=under("tests/"),
        solution=under("solution/"),
    )
