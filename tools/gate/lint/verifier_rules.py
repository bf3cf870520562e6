"""Lint rules for the task's tests: a reward file written by test.sh, every path the tests check
named in instruction.md, pinned requirements files.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement

from autoenvscaling.tools.gate.lint.dockerfile_rules import shared_inputs
from autoenvscaling.tools.gate.lint.model import LintContext, TaskView
from autoenvscaling.tools.gate.lint.written_paths import is_written, written_by_verifier
from autoenvscaling.tools.tasks.dockerfile import (
    Dockerfile,
    DockerfileError,
)

# Absolute paths the tests may touch without the instruction naming them.
_SYSTEM_PREFIXES = (
    "/tests",
    "/logs",
    "/solution",
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib32",
    "/lib64",
    "/etc",
    "/dev",
    "/proc",
    "/sys",
    "/tmp",
    "/var",
    "/run",
    "/boot",
    "/opt/conda",
    "/nix",
)
_ABS_PATH = re.compile(r"(?<![\w.:/~$\\{}-])(/[A-Za-z0-9_.-]+(?:/[A-Za-z0-9_.-]+)*)")
_DATA_EXT = (
    "json|jsonl|csv|tsv|txt|log|db|sqlite|sqlite3|out|md|yaml|yml|toml|xml|html|ini|cfg|conf|"
    "sql|dat|bin|parquet|png|jpg|c|h|cpp|py|sh|js|rs|go|patch|diff|tar|gz|zip|pem|key"
)
_REL_FILE = re.compile(
    rf"(?<![\w./$\\{{}}-])([A-Za-z0-9_][\w.-]*(?:/[\w.-]+)*\.(?:{_DATA_EXT}))(?![\w-]|\.\w)"
)
_TASK_FILE_NAMES = {"instruction.md", "task.toml", "test.sh", "solve.sh", "Dockerfile"}
# A path named to be absent: tests pass it to the agent's program to check its error handling
# (`/app/does-not-exist.txt`); no instruction names it, since nothing may create it.
_MEANT_ABSENT = re.compile(
    r"non[-_]?exist|does[-_]?not[-_]?exist|not[-_]?exist|no[-_]?such[-_]", re.I
)
_QUOTED = re.compile(r"""(["'])((?:(?!\1)[^\\\n]|\\.)*)\1""")


def verifier_sources(task: TaskView) -> list[tuple[Path, str]]:
    """Text of the scripts under tests/ (shell, Python, anything with a shebang)."""
    out: list[tuple[Path, str]] = []
    if not task.tests_dir.is_dir():
        return out
    for path in sorted(p for p in task.tests_dir.rglob("*") if p.is_file()):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if path.suffix in (".sh", ".bash", ".py") or text.startswith("#!"):
            out.append((path, text))
    return out


def check_reward(ctx: LintContext, task: TaskView, sources: list[tuple[Path, str]]) -> None:
    if task.test_script is None:  # reported as a missing file
        return
    if any(re.search(r"reward\.(txt|json)", text) for _, text in sources):
        return
    ctx.add(
        "no-reward-file",
        "error",
        task.test_script,
        "never writes /logs/verifier/reward.txt or /logs/verifier/reward.json. Harbor ignores "
        "test.sh's exit code, so end it with e.g. `if python3 /tests/test_outputs.py; then echo 1 "
        "> /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi`",
    )


def _workdir(task: TaskView) -> str:
    if task.workdir:
        return task.workdir
    if task.dockerfile is None:
        return "/"
    try:
        return Dockerfile.read(task.dockerfile).workdir() or "/"
    except DockerfileError:
        return "/"  # the Dockerfile rules report an unreadable Dockerfile


def _mentioned(name: str, instruction: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-]|\.\w)", instruction) is not None


def _is_system(path: str) -> bool:
    return any(path == p or path.startswith(p + "/") for p in _SYSTEM_PREFIXES)


def _path_candidates(path: Path, text: str) -> list[tuple[int, str]]:
    """(line, absolute path) for the paths a test script refers to.

    Absolute paths anywhere; in Python also file-name literals joined onto a task folder on
    the same line (`Path("/app/out") / "report.json"`). Other relative names are skipped: they
    are too often files of a scratch repo or temp dir the script builds for itself.
    """
    out: list[tuple[int, str]] = []
    in_docstring = False
    for number, line in enumerate(text.splitlines(), 1):
        quotes = line.count('"""') + line.count("'''") if path.suffix == ".py" else 0
        if quotes % 2:
            in_docstring = not in_docstring  # a docstring's first or last line
            continue
        if quotes and line.lstrip().startswith(('"""', "'''")):
            continue  # a one-line docstring
        if in_docstring or line.lstrip().startswith("#"):  # prose and comments do not check
            continue
        absolute = [m.group(1).rstrip(".") for m in _ABS_PATH.finditer(line)]
        anchors = [p for p in absolute if not _is_system(p) and "." not in PurePosixPath(p).name]
        joined: list[str] = []
        if path.suffix == ".py" and anchors:
            masked = _ABS_PATH.sub(" ", line)
            pieces = [m.group(2) for m in _QUOTED.finditer(masked)]
            joined = [
                posixpath.join(anchors[0], m[1]) for p in pieces if (m := _REL_FILE.fullmatch(p))
            ]
        if joined:  # the folder is only the anchor of the file the line checks
            absolute.remove(anchors[0])
        out.extend((number, p) for p in absolute + joined)
    return out


def check_outputs_named(ctx: LintContext, task: TaskView, sources: list[tuple[Path, str]]) -> None:
    """Every path the tests read must be named in instruction.md (TB review rubric, rule 1/4).

    Heuristic. Not flagged: system and Harbor paths (/tests, /logs, /usr, /tmp, ...), files
    shipped in environment/ (inputs, not outputs), tests/ files that are copies of those (shared
    generators), files the tests write, build, move or delete themselves (written_paths.py),
    names that say the file must not exist (`/app/does-not-exist.txt`, an error-path probe), git
    internals, bare top-level folders, and any path whose full form, workdir-relative form or
    file name appears in the instruction. An error, not a warning: an output the instruction
    never names leaves the task unusable (no agent can know to write it).
    """
    instruction = task.instruction
    if not instruction or not instruction.strip():  # reported as a missing or empty file
        return
    workdir = _workdir(task)
    shipped = {p.name for p in task.environment_dir.rglob("*")}  # input files and folders
    if task.tests_dir.is_dir():  # the tests' own files, wherever a path says they lie
        shipped |= {p.name for p in task.tests_dir.rglob("*") if p.is_file()}
    reported: set[str] = set()
    shared = shared_inputs(task)
    written = written_by_verifier(sources)
    for path, text in sources:
        if path in shared:
            continue
        for line, full in _path_candidates(path, text):
            full = posixpath.normpath(full)
            parts = PurePosixPath(full).parts[1:]
            name = PurePosixPath(full).name
            if (
                full in reported
                or not parts
                or _is_system(full)
                or ".git" in parts  # VCS internals: the instruction speaks of the repo state
                or "bin" in parts[:-1]  # a program the tests run (/opt/venv/bin/python)
                or (len(parts) == 1 and "." not in name)
                or full == workdir
                or workdir.startswith(full + "/")
                or name in shipped
                or name in _TASK_FILE_NAMES
                or is_written(full, written, workdir)  # the tests make or clear it themselves
                or _MEANT_ABSENT.search(name)  # named to be absent: an error-handling probe
            ):
                continue
            relative = posixpath.relpath(full, workdir) if workdir != "/" else full.lstrip("/")
            if (
                full in instruction
                or (not relative.startswith("..") and _mentioned(relative, instruction))
                or _mentioned(name, instruction)
            ):
                continue
            reported.add(full)
            ctx.add(
                "output-not-in-instruction",
                "error",
                path,
                f"checks {full}, but instruction.md never names it (neither the path nor "
                f"{name!r}). State every file the tests check, with its exact path and format, "
                "in instruction.md — or stop checking it (an unnamed output leaves the task "
                "unsolvable: no agent can know to write it)",
                line,
            )


def check_requirements(ctx: LintContext, task: TaskView) -> None:
    """requirements*.txt shipped with the task should pin with == (Harbor checks only pip lines);
    a warning, like Harbor's rule for pip lines."""
    for folder in (task.environment_dir, task.tests_dir):
        if not folder.is_dir():
            continue
        for path in sorted(folder.rglob("requirements*.txt")):
            try:
                lines = path.read_text(encoding="utf-8").splitlines()
            except (UnicodeDecodeError, OSError):
                continue
            for number, raw in enumerate(lines, 1):
                line = raw.split("#", 1)[0].strip()
                if not line or line.startswith("-"):
                    continue
                try:
                    requirement = Requirement(line)
                except InvalidRequirement:
                    continue
                if requirement.url or any(
                    s.operator in ("==", "===") and "*" not in s.version
                    for s in requirement.specifier
                ):
                    continue
                ctx.add(
                    "unpinned-python-dependency",
                    "warning",  # a style rule, as in Harbor's own lint
                    path,
                    f"`{line}` is not pinned; write {requirement.name}==<version>",
                    number,
                )
