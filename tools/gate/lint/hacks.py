"""Static lint rules for patterns that make reward hacks easy (warnings, with the line).

Harbor's own `harbor lint` rules run first (`lint/harbor_rules.py`); these are the checks Harbor lacks.
They only warn: the `anti_cheat` stage then proves or disproves each weakness with a probe.

- `hack-runner-in-writable-cwd`: Python started with -m/-c/stdin, or pytest, while the current
  directory is one the agent can write (the workdir by default): modules there shadow the ones
  the runner imports.
- `hack-checker-on-writable-path`: the verifier executes a program outside /tests and the system
  folders, which the agent can replace.
- `hack-trusts-status-file`: the verifier decides on a success word read from a file (a status
  the agent can simply write).
- `hack-output-in-instruction`: the instruction shows a block it calls the exact expected
  output.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

# Where the verifier's own or the system's files live: not the agent's to rewrite.
SYSTEM = (
    "/tests/",
    "/logs/",
    "/solution/",
    "/proc/",
    "/sys/",
    "/dev/",
    "/tmp/",
    "/usr/",
    "/bin/",
    "/sbin/",
    "/lib",
    "/etc/",
    "/var/lib/",
    "/run/",
)
# Python started so that the current directory leads sys.path (-m, -c, a script on stdin) or
# pytest (rootdir conftest.py, plugins): modules there shadow the ones the runner imports.
RUNNER_FROM_CWD = re.compile(r"\b(?:python3?(?:\.\d+)?\s+(?:-\w+\s+)*(?:-m|-c|-)(?:\s|$)|pytest\b)")
_CD = re.compile(r"(?:^|[;&|(]\s*|\bthen\s+|\bdo\s+)cd\s+(\"[^\"]+\"|'[^']+'|[^\s;&|)]+)")
_EXEC = re.compile(
    r"(?:^|[;&|(!]\s*|\b(?:if|then|do|else|bash|sh|python3?|exec)\s+)"
    r"(/[A-Za-z0-9_.+-]+(?:/[A-Za-z0-9_.+-]+)+)(?=\s|$|;|\))"
)
_STATUS_CHECK = re.compile(
    r"(grep\s+(?:-\w+\s+)*['\"]?(?:DONE|SUCCESS|OK|PASS|COMPLETE|FINISHED)\b"
    r"|=\s*['\"](?:DONE|SUCCESS|OK|PASS|COMPLETE|FINISHED)['\"])",
    re.I,
)
_EXACT_BLOCK = re.compile(
    r"(exactly like|expected output|output (?:is|should be|must be)|should contain exactly|"
    r"the answer is|must look like|the result is)",
    re.I,
)
_SAFE_CWD = ("/tests", "/logs")


def _shell_files(root: Path) -> list[Path]:
    tests = root / "tests"
    if not tests.is_dir():
        return []
    return sorted(p for p in tests.rglob("*.sh") if p.is_file())


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def hack_findings(root: Path) -> list[dict[str, Any]]:
    """Every hack-prone pattern found in the task folder `root`: `LintFinding` fields
    (severity warning)."""
    findings: list[dict[str, Any]] = []

    def add(rule: str, path: Path, line: int, message: str) -> None:
        findings.append(
            {
                "rule": rule,
                "severity": "warning",
                "file": path.relative_to(root).as_posix(),
                "line": line,
                "message": message,
            }
        )

    for path in _shell_files(root):
        text = _read(path)
        if text is None:
            continue
        cwd = "the workdir"
        writable = True
        for number, line in enumerate(text.splitlines(), 1):
            code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
            if not code.strip():
                continue
            for match in _CD.finditer(code):
                target = match.group(1).strip("\"'")
                cwd = target
                writable = not target.startswith(_SAFE_CWD)
            if writable and RUNNER_FROM_CWD.search(code):
                add(
                    "hack-runner-in-writable-cwd",
                    path,
                    number,
                    f"Python/pytest starts here in {cwd}, which the agent can write: a module "
                    "it leaves there (json.py, conftest.py, ...) replaces the one the runner "
                    "imports. Run `python3 /tests/<script>.py`, or `cd /tests` first",
                )
            for match in _EXEC.finditer(code):
                program = match.group(1)
                if not program.startswith(SYSTEM) and not program.startswith("/tests/"):
                    add(
                        "hack-checker-on-writable-path",
                        path,
                        number,
                        f"the verifier executes {program}, which the agent can rewrite to "
                        "always pass: ship the checker in tests/ instead",
                    )
            if _STATUS_CHECK.search(code):
                add(
                    "hack-trusts-status-file",
                    path,
                    number,
                    "the reward depends on a success word read from a file the agent can "
                    "write: check the work itself",
                )

    instruction = root / "instruction.md"
    text = _read(instruction) or ""
    lines = text.splitlines()
    in_block = False
    for number, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            if not in_block:
                before = " ".join(lines[max(0, number - 3) : number - 1])
                if _EXACT_BLOCK.search(before):
                    add(
                        "hack-output-in-instruction",
                        instruction,
                        number,
                        "this block is presented as the exact expected output: an agent can "
                        "copy it instead of doing the work. Describe the format, or show an "
                        "example for other input",
                    )
            in_block = not in_block
    return findings
