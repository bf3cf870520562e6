"""Lint rules for the task's tests: a reward file written by test.sh, every path the tests check
named in instruction.md, pinned requirements files.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement

from ...tasks.dockerfile import (
    Dockerfile,
    DockerfileError,
)
from .dockerfile_rules import shared_inputs
from .model import LintContext, TaskView
from .written_paths import is_written, written_by_verifier

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
# A folder a named tool makes: a test may check it (`/app/node_modules/sharp`) where the
# instruction only says to run the tool (`npm install`). Folder -> the words that name its maker.
_TOOL_MADE = {
    "node_modules": ("npm", "yarn", "pnpm"),
    "__pycache__": ("python", "python3", "compile", "import"),
    ".venv": ("venv", "virtualenv", "uv"),
    "site-packages": ("pip", "install"),
    "target": ("cargo",),
    ".gradle": ("gradle",),
}
# Text that fills a placeholder of an f-string or str.format: `f"/data/region_{r}.csv"` names
# /data/region_*.csv, not a file /data/region_.
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_TEMPLATE_TAIL = re.compile(r"(?:\{[^{}\s'\"]*\}|[A-Za-z0-9_.\-/])*")


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


def _template(line: str, match: re.Match[str]) -> str:
    """The path a match names; one a placeholder continues (`{`) is a template, its fillings
    written `*` (`/data/region_*.csv`)."""
    found = match.group(1)
    if not line.startswith("{", match.end()):
        return found.rstrip(".")
    tail = _TEMPLATE_TAIL.match(line, match.end())
    rest = tail.group(0) if tail else ""
    return (found + _PLACEHOLDER.sub("*", rest)).rstrip(".")


def _template_named(name: str, names: set[str], instruction: str) -> bool:
    """A template's file name (`region_*.csv`) matches a shipped file or a name the instruction
    writes out (`region_north.csv`, `region_<name>.csv`)."""
    if any(fnmatch.fnmatchcase(n, name) for n in names):
        return True
    parts = [re.escape(p) for p in name.split("*")]
    pattern = r"\S{0,40}?".join(parts)
    return re.search(rf"(?<![\w.-]){pattern}", instruction) is not None


#: The most of environment/ read for paths its inputs hold (files over the first cap skipped).
_INPUT_FILE_BYTES = 1024 * 1024
_INPUT_TOTAL_BYTES = 16 * 1024 * 1024


def _input_text(task: TaskView) -> str:
    """The text of environment/'s files (its Dockerfile aside), bounded: a path written in an
    input (a ZooKeeper node in an event log, a URL path in a config) is data the agent reads."""
    out: list[str] = []
    total = 0
    for path in sorted(p for p in task.environment_dir.rglob("*") if p.is_file()):
        if path.name == "Dockerfile":
            continue
        size = path.stat().st_size
        if size > _INPUT_FILE_BYTES or total + size > _INPUT_TOTAL_BYTES:
            continue
        total += size
        try:
            out.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return "\n".join(out)


def _tool_made(full: str, instruction: str) -> bool:
    """Under a folder a tool the instruction names makes (`node_modules` and npm)."""
    for part in PurePosixPath(full).parts:
        makers = _TOOL_MADE.get(part)
        if makers and any(re.search(rf"\b{re.escape(m)}\b", instruction, re.I) for m in makers):
            return True
    return False


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
        absolute = [_template(line, m) for m in _ABS_PATH.finditer(line)]
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
    internals, bare top-level folders, what a tool the instruction names makes (`node_modules`
    after `npm install`), an f-string template whose names (`region_*.csv`) a shipped file or
    the instruction fits, a path an input file of environment/ writes out (a ZooKeeper node
    in an event log: data, not a file), and any path whose full form, workdir-relative form or file name
    appears in the instruction. An error, not a warning: an output the instruction
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
    inputs: str | None = None  # read once, and only when a path is not named otherwise
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
                or _tool_made(full, instruction)  # node_modules after `npm install`
            ):
                continue
            if "*" in name:  # a template: named when a shipped or instructed name fits it
                if _template_named(name, shipped, instruction):
                    continue
            relative = posixpath.relpath(full, workdir) if workdir != "/" else full.lstrip("/")
            if (
                full in instruction
                or (not relative.startswith("..") and _mentioned(relative, instruction))
                or _mentioned(name, instruction)
            ):
                continue
            if "*" not in full and task.environment_dir.is_dir():
                inputs = _input_text(task) if inputs is None else inputs
                if _mentioned(full, inputs):  # data of an input, not a file to write
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
