"""What `import --rewrite OUT` changes in a copy of an imported task: only what a rule can change
mechanically without changing what the task asks or how it is graded. The original is never
touched; each change is recorded (`Change`) and the copy is linted again.

- `dockerfile-cmd-ignored`: CMD lines removed (Harbor starts the container with its own command).
- CRLF line ends in the shell scripts of tests/ and solution/ (`task-format`) made LF.
- `hack-runner-in-writable-cwd` in tests/test.sh: `cd /tests` before the line that starts
  Python or pytest in the agent's folder, when nothing from that line on names a relative path
  and the Python tests open no relative file (they would now resolve under /tests).

Not rewritten, only reported: what changes grading or the environment (a separate verifier, a
base image, pins, timeouts, vendoring what a build fetches).
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from .importer import Change
from .lint import LintReport

_RELATIVE_TOKEN = re.compile(
    r"(?<![\w/$.{-])(?:\./|\.\./)?[A-Za-z_][\w.-]*(?:/[\w.-]+)*\.(?:py|sh|txt|json|csv|log|ini|toml|cfg)\b"
)
_PY_RELATIVE_OPEN = re.compile(r"""(?:open|Path)\(\s*[rbuf]*["'](?!/)[^"'\s]+["']""")


def _drop_cmd(task: Path, report: LintReport) -> list[Change]:
    dockerfile = task / "environment" / "Dockerfile"
    lines_at = sorted(
        {f.line for f in report.warnings if f.rule == "dockerfile-cmd-ignored" and f.line},
        reverse=True,
    )
    if not lines_at or not dockerfile.is_file():
        return []
    lines = dockerfile.read_text(encoding="utf-8").splitlines(keepends=True)
    changes = []
    for line in lines_at:
        start = line - 1
        end = start
        while end < len(lines) - 1 and lines[end].rstrip("\r\n").endswith("\\"):
            end += 1  # a CMD continued over several lines goes whole
        removed = "".join(lines[start : end + 1]).strip()
        del lines[start : end + 1]
        changes.append(
            Change(
                file="environment/Dockerfile",
                rule="dockerfile-cmd-ignored",
                what=f"removed line {line} `{removed[:80]}` (Harbor ignores CMD)",
            )
        )
    dockerfile.write_text("".join(lines), encoding="utf-8")
    return changes[::-1]


def _crlf(task: Path) -> list[Change]:
    changes = []
    for folder in ("tests", "solution"):
        for path in sorted((task / folder).rglob("*.sh")) if (task / folder).is_dir() else []:
            data = path.read_bytes()
            if b"\r\n" in data:
                path.write_bytes(data.replace(b"\r\n", b"\n"))
                changes.append(
                    Change(
                        file=path.relative_to(task).as_posix(),
                        rule="task-format",
                        what="CRLF line ends made LF (bash reads the CR as part of each command)",
                    )
                )
    return changes


def _runner_in_tests(task: Path, report: LintReport) -> list[Change]:
    hits = sorted(
        f.line
        for f in report.warnings
        if f.rule == "hack-runner-in-writable-cwd" and f.file == "tests/test.sh" and f.line
    )
    script = task / "tests" / "test.sh"
    if not hits or not script.is_file():
        return []
    lines = script.read_text(encoding="utf-8").splitlines(keepends=True)
    first = hits[0]
    rest = [ln.split("#", 1)[0] for ln in lines[first - 1 :]]
    if any(re.search(r"(^|[;&|]\s*)cd\s", ln) for ln in rest):
        return []  # it moves on its own later: leave its order of folders alone
    if any(_RELATIVE_TOKEN.search(ln) for ln in rest):
        return []
    for source in sorted((task / "tests").rglob("*.py")):
        try:
            if _PY_RELATIVE_OPEN.search(source.read_text(encoding="utf-8")):
                return []
        except (OSError, UnicodeDecodeError):
            return []
    lines.insert(first - 1, "cd /tests  # added by import --rewrite: run the checks from /tests\n")
    script.write_text("".join(lines), encoding="utf-8")
    return [
        Change(
            file="tests/test.sh",
            rule="hack-runner-in-writable-cwd",
            what=f"`cd /tests` before line {first}, so modules the agent leaves in its folder "
            "do not shadow the ones the runner imports",
        )
    ]


def rewrite_task(task: Path, dest: Path, report: LintReport) -> list[Change]:
    """Copy `task` to `dest` (replacing it) and apply the mechanical rewrites to the copy."""
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(task, dest, symlinks=True)
    return [*_drop_cmd(dest, report), *_crlf(dest), *_runner_in_tests(dest, report)]
