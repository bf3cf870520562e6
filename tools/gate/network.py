"""Network as a task's declared need: what a task downloads, and whether this gate may give it.

Real Terminal-Bench tasks fetch at build time (`apt-get install`, `pip install` in the
Dockerfile) and at grading time (`curl ... astral.sh/uv`, then `uvx pytest` in tests/test.sh).
Offline, such a task fails in its build or its verifier, and the gate would blame the solution.
So the need is found here, statically, with the file, line and phase it sits in; the trial
stages then name it when the trial confirms it (a build that fails, an oracle that scores 0).

Whether a task *gets* a network is a policy, never the task's own say: it must declare it
(`allow_internet = true`, or an explicit `network_mode = "public"` / `"allowlist"`; Harbor's
implicit default "public" is not a declaration), and the user must allow it
(`GateConfig.allow_internet`, `--allow-internet`). Both are recorded in the verdict.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from ..tasks.dockerfile import Dockerfile, DockerfileError

Phase = Literal["build", "verifier", "solution"]


class NetworkUse(BaseModel):
    """One command of the task that needs the internet."""

    phase: Phase
    file: str = Field(description="path relative to the task folder")
    line: int
    what: str = Field(description="what it fetches, e.g. 'downloads uv'")
    command: str = Field(description="the command, cut to 120 characters")

    def __str__(self) -> str:
        return f"{self.file}:{self.line} {self.what} (`{self.command}`)"


class NetworkNeed(BaseModel):
    """What a task fetches, whether it declares the internet, whether this gate grants it."""

    uses: list[NetworkUse] = Field(default_factory=list)
    declared: bool = Field(
        default=False, description="task.toml asks for the internet (allow_internet, network_mode)"
    )
    allowed_by_policy: bool = Field(default=False, description="GateConfig.allow_internet")

    @property
    def granted(self) -> bool:
        return self.declared and self.allowed_by_policy

    def phases(self) -> list[Phase]:
        return sorted({u.phase for u in self.uses})

    def in_phase(self, *phases: Phase) -> list[NetworkUse]:
        return [u for u in self.uses if u.phase in phases]

    def fetched(self, *phases: Phase) -> str:
        """What the task fetches in `phases` (all when none given), with file, line, command."""
        uses = self.in_phase(*phases) if phases else self.uses
        if not uses:
            return ""
        shown = "; ".join(str(u) for u in uses[:3]) + (
            f" (+{len(uses) - 3} more)" if len(uses) > 3 else ""
        )
        where = {"build": "its Dockerfile", "verifier": "its verifier", "solution": "its solution"}
        whose = " and ".join(where[p] for p in sorted({u.phase for u in uses}))
        return f"{whose} needs the internet — {shown}"

    def advice(self, *phases: Phase) -> str:
        """A sentence for a verdict: what the task fetches and how to make it run here."""
        fetched = self.fetched(*phases)
        if not fetched:
            return ""
        if self.declared and not self.allowed_by_policy:
            fix = (
                "the task declares the internet, but this gate's policy does not allow it: run "
                "the gate with --allow-internet (GateConfig.allow_internet), or vendor what it "
                "fetches into the task"
            )
        elif not self.declared:
            fix = (
                "the task does not declare the internet and gets none: vendor what it fetches "
                "into environment/ (wheels, a pinned runner, packages installed in the image) "
                "or, for a task that must fetch, declare [environment] allow_internet = true and "
                "run the gate with --allow-internet"
            )
        else:
            fix = (
                "the task was granted the internet (a user-mode network without the host's "
                "loopback, podman backend), so the fetch itself failed: check the URL and that "
                "the host reaches it"
            )
        return f"{fetched}; {fix}"


# One pattern per kind of fetch: (regex over one command, what it does). First match wins.
_FETCHES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:curl|wget)\b[^|;&]*astral\.sh/uv"), "downloads uv"),
    (re.compile(r"\b(?:curl|wget)\b[^|;&]*\bhttps?://"), "downloads a file"),
    (re.compile(r"\buvx\b(?![^|;&]*--offline)"), "fetches its Python tools with uvx"),
    (
        re.compile(
            r"\buv\s+(?:pip\s+install|sync|add|tool\s+install|run\s+--with)\b(?![^|;&]*--offline)"
        ),
        "installs Python packages with uv",
    ),
    (
        re.compile(r"\bpip[0-9.]*\s+install\b(?![^|;&]*(?:--no-index|--find-links|-f\s))"),
        "installs Python packages with pip",
    ),
    (re.compile(r"\b(?:apt-get|apt)\s+(?:-\S+\s+)*(?:install|update|source)\b"), "runs apt"),
    (re.compile(r"\b(?:apk\s+add|yum\s+install|dnf\s+install|zypper\s+in)"), "installs packages"),
    (re.compile(r"\bgit\s+clone\b[^|;&]*(?:https?://|git@|git://)"), "clones a repository"),
    (
        re.compile(
            r"\b(?:npm\s+(?:install|i|ci)|npx|yarn\s+(?:add|install)|pnpm\s+(?:add|install))\b"
        ),
        "installs npm packages",
    ),
    (re.compile(r"\bgo\s+(?:get|install|mod\s+download)\b"), "downloads Go modules"),
    (re.compile(r"\bcargo\s+(?:install|fetch)\b(?![^|;&]*--offline)"), "downloads Rust crates"),
    (re.compile(r"\b(?:gem\s+install|conda\s+install|mamba\s+install)\b"), "installs packages"),
]
_CONTINUED = re.compile(r"\\\s*$")


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined; comments dropped."""
    out: list[tuple[int, str]] = []
    pending: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
            if line.lstrip().startswith("#"):
                continue
        if _CONTINUED.search(line):
            pending.append(_CONTINUED.sub(" ", line))
            continue
        pending.append(line)
        out.append((start, " ".join(pending)))
        pending = []
    if pending:
        out.append((start, " ".join(pending)))
    return out


def fetches(text: str) -> list[tuple[int, str, str]]:
    """(line, what, command) for each command of a shell text that needs the internet."""
    found: list[tuple[int, str, str]] = []
    for number, line in _logical_lines(text):
        for pattern, what in _FETCHES:
            match = pattern.search(line)
            if match:
                command = " ".join(line[match.start() :].split())
                found.append(
                    (number, what, command[:117] + "..." if len(command) > 120 else command)
                )
                break
    return found


def _dockerfile_uses(task: Path) -> list[NetworkUse]:
    path = task / "environment" / "Dockerfile"
    try:
        parsed = Dockerfile.read(path)
    except (DockerfileError, OSError, UnicodeDecodeError):
        return []  # a missing or unreadable Dockerfile is reported by the format checks
    uses = []
    for instruction in parsed.instructions:
        if instruction.name == "RUN":
            for _line, what, command in fetches(instruction.value):
                uses.append(
                    NetworkUse(
                        phase="build",
                        file="environment/Dockerfile",
                        line=instruction.line,
                        what=what,
                        command=command,
                    )
                )
        elif instruction.name == "ADD" and re.search(r"\bhttps?://", instruction.value):
            uses.append(
                NetworkUse(
                    phase="build",
                    file="environment/Dockerfile",
                    line=instruction.line,
                    what="downloads a file",
                    command=f"ADD {instruction.value}"[:120],
                )
            )
    return uses


def _script_uses(task: Path, folder: str, phase: Phase) -> list[NetworkUse]:
    root = task / folder
    if not root.is_dir():
        return []
    uses = []
    for path in sorted(p for p in root.rglob("*.sh") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        rel = path.relative_to(task).as_posix()
        uses += [
            NetworkUse(phase=phase, file=rel, line=line, what=what, command=command)
            for line, what, command in fetches(text)
        ]
    return uses


def declares_internet(task: Path) -> bool:
    """task.toml asks for the internet explicitly (Harbor's implicit "public" does not count)."""
    try:
        raw = tomllib.loads((task / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return False
    tables = [raw.get("environment"), raw.get("agent"), raw.get("verifier")]
    for table in tables:
        if not isinstance(table, dict):
            continue
        if table.get("allow_internet") is True:
            return True
        if table.get("network_mode") in ("public", "allowlist"):
            return True
    return False


def network_need(task: Path, *, allow_internet: bool = False) -> NetworkNeed:
    """Everything `task` fetches (build, verifier, solution), and the policy's answer."""
    task = Path(task)
    uses = (
        _dockerfile_uses(task)
        + _script_uses(task, "tests", "verifier")
        + _script_uses(task, "solution", "solution")
    )
    return NetworkNeed(
        uses=uses, declared=declares_internet(task), allowed_by_policy=allow_internet
    )
