"""The gate's static `lint` stage: everything that can be judged without building anything.

Runs the task-format checks of `task_format`, a chosen subset of Harbor's own `harbor lint`
rules, and the checks Harbor lacks: the Dockerfile subset our sandboxes build, tests/ and
solution/ kept out of the image, a reward file written by test.sh, every path the tests check
named in instruction.md, pinned requirements files. Each finding names the file and what to change.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import posixpath
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from harbor.lint import LintRule
from harbor.lint import lint_task as harbor_lint_task
from harbor.models.task.config import TaskConfig
from harbor.models.task.task import strip_canary
from packaging.requirements import InvalidRequirement, Requirement
from pydantic import BaseModel, Field

from autoenvscaling.tools.gate.lint_hacks import hack_findings
from autoenvscaling.tools.tasks.dockerfile import (
    Dockerfile,
    DockerfileError,
    Instruction,
    copy_args,
)
from autoenvscaling.tools.tasks.format import check_task
from autoenvscaling.tools.tasks.limits import TaskLimits, inventory

__all__ = ["SUPPORTED_DOCKERFILE_INSTRUCTIONS", "LintFinding", "LintReport", "lint_task"]

Severity = Literal["error", "warning"]

#: The Dockerfile instructions a task may use (a small, reviewable subset of what engines build).
SUPPORTED_DOCKERFILE_INSTRUCTIONS = frozenset(
    {"FROM", "RUN", "COPY", "ADD", "WORKDIR", "ENV", "ARG", "USER"}
)
#: Base images the offline base image stands in for (`make bases` tags it as the seed pool's).
_MAPPED_BASES = re.compile(r"^(?:docker\.io/)?(?:library/)?(?:debian|ubuntu|python:3)(?:[:.@-]|$)")

# Harbor rules we take over, with our severity. Left out on purpose: shared-verifier and
# root-agent (our trials use the shared verifier as root, like TB2), unpinned-image (the
# offline base is tagged as the FROM images), agent-image-test-leak (our `image-test-leak` is a superset), and the
# config/file rules that `task_format` reports with more precise messages.
_HARBOR_RULES: dict[LintRule, Severity] = {
    LintRule.UNPINNED_PYTHON_DEPENDENCY: "error",
    LintRule.OVERLAPPING_ARTIFACTS: "error",
    LintRule.ARTIFACT_LOG_OVERLAP: "error",
    LintRule.COMPOSE_PRIVILEGED: "error",
    LintRule.COMPOSE_ADDITIONAL_CAPABILITIES: "error",
    LintRule.COMPOSE_WRITABLE_BIND_MOUNT: "error",
    LintRule.COMPOSE_EXTERNAL_BIND_MOUNT: "error",
    LintRule.COMPOSE_SYMLINK_BIND_MOUNT: "error",
    LintRule.VERIFIER_RUNTIME_INSTALL: "warning",
    LintRule.VERIFIER_NETWORK_DOWNLOAD: "warning",
}

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
_QUOTED = re.compile(r"""(["'])((?:(?!\1)[^\\\n]|\\.)*)\1""")


_UNSUPPORTED_ADVICE = {
    "CMD": "Remove it: Harbor starts the container and runs every command itself.",
    "ENTRYPOINT": "Remove it: Harbor starts the container and runs every command itself.",
    "EXPOSE": "Remove it: trials run without network, nothing needs a published port.",
    "HEALTHCHECK": "Remove it and set [environment].healthcheck in task.toml instead.",
    "LABEL": "Remove it; task metadata belongs in task.toml [metadata].",
    "MAINTAINER": "Remove it; the author belongs in task.toml [metadata].",
    "SHELL": "Remove it and call the shell explicitly in RUN (e.g. RUN bash -c '...').",
    "VOLUME": "Remove it; the sandbox keeps the whole filesystem of the trial.",
}


class LintFinding(BaseModel):
    rule: str = Field(description="kebab-case rule id, e.g. 'image-test-leak'")
    severity: Severity
    file: str = Field(description="path relative to the task folder")
    line: int | None = None
    message: str = Field(description="what is wrong and what to change")

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: [{self.rule}] {self.message}"


class LintReport(BaseModel):
    task: str
    ok: bool = Field(description="no finding of severity 'error'")
    findings: list[LintFinding] = Field(default_factory=list)

    @property
    def errors(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[LintFinding]:
        return [f for f in self.findings if f.severity == "warning"]

    def summary(self) -> str:
        """One line per finding, errors first: the text a proposer gets back."""
        ordered = self.errors + self.warnings
        return "\n".join(f"{f.severity}: {f}" for f in ordered) or "lint: no findings"


class _Ctx:
    """Per-run state: the task root and the findings collected so far."""

    def __init__(self, root: Path):
        self.root = root
        self.findings: list[LintFinding] = []

    def rel(self, path: Path | str) -> str:
        path = Path(os.path.abspath(path))  # never follow a link out of the task
        try:
            return path.relative_to(self.root).as_posix() or "."
        except ValueError:
            return path.name or "."

    def add(
        self, rule: str, severity: Severity, file: Path | str, message: str, line: int | None = None
    ) -> None:
        self.findings.append(
            LintFinding(
                rule=rule, severity=severity, file=self.rel(file), line=line, message=message
            )
        )


@dataclass(frozen=True)
class _View:
    """Best-effort view of a task folder, so the rules run even when the format checks fail."""

    root: Path
    instruction: str | None
    environment_dir: Path
    dockerfile: Path | None
    tests_dir: Path
    test_script: Path | None
    solution_dir: Path | None
    workdir: str | None  # [environment].workdir

    @classmethod
    def of(cls, root: Path) -> _View:
        def text(path: Path) -> str | None:
            try:
                return path.read_text(encoding="utf-8") if path.is_file() else None
            except (UnicodeDecodeError, OSError):
                return None

        instruction = text(root / "instruction.md")
        workdir = None
        try:
            raw = tomllib.loads(text(root / "task.toml") or "")
            workdir = TaskConfig.model_validate(raw).environment.workdir
        except (tomllib.TOMLDecodeError, ValueError, RecursionError):
            workdir = None  # invalid config is reported by the format checks
        dockerfile = root / "environment" / "Dockerfile"
        test_script = root / "tests" / "test.sh"
        return cls(
            root=root,
            instruction=strip_canary(instruction) if instruction is not None else None,
            environment_dir=root / "environment",
            dockerfile=dockerfile if text(dockerfile) is not None else None,
            tests_dir=root / "tests",
            test_script=test_script if text(test_script) is not None else None,
            solution_dir=root / "solution",
            workdir=workdir,
        )


# --------------------------------------------------------------------------- Harbor's rules


def _harbor_rules(ctx: _Ctx, *, quiet: bool) -> None:
    try:
        findings = harbor_lint_task(ctx.root, selected_rules=set(_HARBOR_RULES))
    except (OSError, ValueError, RuntimeError) as exc:  # Harbor lets these propagate
        if quiet:  # the format errors already say what made the task unreadable
            return
        ctx.add("harbor-lint", "error", ".", f"Harbor's lint could not read the task: {exc}")
        return
    for finding in findings:
        message = finding.message
        if finding.rule == LintRule.UNPINNED_PYTHON_DEPENDENCY and finding.line:
            path = Path(finding.path)
            names = ", ".join(f"`{n}`" for n in _unpinned_packages(path, finding.line))
            quoted = _source_line(path, finding.line)
            message = (
                f"{names or 'a package'} not pinned in `{quoted}`: write each as name==version "
                "(e.g. requests==2.32.3) or install from a pinned requirements file"
            )
        ctx.add(str(finding.rule), _HARBOR_RULES[finding.rule], finding.path, message, finding.line)


def _unpinned_packages(path: Path, line: int) -> list[str]:
    """The unpinned packages Harbor saw on `line`, found with Harbor's own parser."""
    try:  # private helpers of harbor 0.25 (pinned <0.26); without them the message is generic
        from harbor.lint.task import _commands, _lines, _packages, _unpinned

        text = dict(_lines(path.read_text(encoding="utf-8"))).get(line, "")
    except (ImportError, OSError, ValueError):
        return []
    text = re.sub(r"^\s*RUN\s+(?:--\S+\s+)*", "", text, flags=re.IGNORECASE)
    return [p for command, _ in _commands(text) for p in _packages(command) if _unpinned(p)]


def _source_line(path: Path, line: int) -> str:
    try:
        text = path.read_text(encoding="utf-8").splitlines()[line - 1].strip()
    except (OSError, UnicodeDecodeError, IndexError):
        return "?"
    return text if len(text) <= 120 else text[:117] + "..."


# --------------------------------------------------------------------------- Dockerfile


def _covered(source: str, files: list[str]) -> list[str]:
    """Files of the build context (relative posix paths) that a COPY source brings in."""
    norm = posixpath.normpath(source.lstrip("/")) if source not in ("", "/") else "."
    if norm == ".":
        return list(files)
    if any(ch in norm for ch in "*?["):
        return [f for f in files if fnmatch.fnmatch(f, norm) or fnmatch.fnmatch(f, f"{norm}/*")]
    return [f for f in files if f == norm or f.startswith(norm + "/")]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


_GRADER_NAME = re.compile(
    r"test\.sh|test_.*\.py|.*_test\.py|conftest\.py|(expected|answer|golden).*", re.IGNORECASE
)


def _hidden_files(task: _View) -> dict[str, tuple[str, bool]]:
    """sha256 -> ('tests/x', is_answer) for the files of tests/ and solution/.

    is_answer: solution files and graders (test.sh, test_*.py, expected*...). Other tests/ files
    may legitimately be shared with environment/ (e.g. a data generator both sides run).
    """
    out: dict[str, tuple[str, bool]] = {}
    for folder in (task.solution_dir, task.tests_dir):
        if folder is None or not folder.is_dir():
            continue
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            if path.stat().st_size:  # empty files (e.g. __init__.py) leak nothing
                answer = folder == task.solution_dir or bool(_GRADER_NAME.fullmatch(path.name))
                out.setdefault(_digest(path), (path.relative_to(task.root).as_posix(), answer))
    return out


def _shared_inputs(task: _View) -> set[Path]:
    """tests/ files byte-identical to a file of environment/: inputs, not checks."""
    if not task.environment_dir.is_dir() or not task.tests_dir.is_dir():
        return set()
    shipped = {_digest(p) for p in task.environment_dir.rglob("*") if p.is_file()}
    return {p for p in task.tests_dir.rglob("*") if p.is_file() and _digest(p) in shipped}


def _dockerfile_rules(ctx: _Ctx, task: _View) -> None:
    if task.dockerfile is None:
        return
    dockerfile = task.dockerfile
    try:
        instructions = Dockerfile.read(dockerfile).instructions
    except DockerfileError as exc:
        ctx.add("dockerfile-parse", "error", dockerfile, str(exc))
        return

    def error(rule: str, message: str, line: int | None = None) -> None:
        ctx.add(rule, "error", dockerfile, message, line)

    context = task.environment_dir
    context_files = sorted(
        p.relative_to(context).as_posix() for p in context.rglob("*") if p.is_file()
    )
    hidden = _hidden_files(task)
    froms = 0
    for ins in instructions:
        at = f"{ins.name} {ins.value}".strip()
        if ins.name not in SUPPORTED_DOCKERFILE_INSTRUCTIONS:
            error(
                "dockerfile-unsupported-instruction",
                f"{ins.name} is not supported; the sandbox builds only "
                f"{', '.join(sorted(SUPPORTED_DOCKERFILE_INSTRUCTIONS))}. "
                + _UNSUPPORTED_ADVICE.get(ins.name, "Remove it."),
                ins.line,
            )
            continue
        if froms == 0 and ins.name not in ("FROM", "ARG"):
            error("dockerfile-no-from", f"{ins.name} comes before FROM; start with FROM", ins.line)
        if ins.heredoc:
            error(
                "dockerfile-heredoc",
                f"{ins.name} uses a heredoc (<<), which the sandbox builder does not parse; put "
                "the script in a file of environment/, COPY it and RUN it, or use printf",
                ins.line,
            )
        if ins.name == "FROM":
            froms += 1
            words = ins.value.split()
            image = next((a for a in words if not a.startswith("--")), "")
            if froms > 1:
                error(
                    "dockerfile-multi-stage",
                    "multi-stage builds are not supported; use a single FROM",
                    ins.line,
                )
            elif any(w.startswith("--") for w in words):
                error(
                    "dockerfile-flags",
                    f"`{at}`: FROM flags such as --platform are not supported; remove them",
                    ins.line,
                )
            elif not _MAPPED_BASES.match(image):
                ctx.add(
                    "dockerfile-base-image",
                    "warning",
                    dockerfile,
                    f"base image {image!r} is not debian:*, ubuntu:* or python:3.*; with no registry "
                    "it must already be in the engine",
                    ins.line,
                )
        elif ins.name == "RUN" and ins.value.lstrip().startswith("--"):
            error(
                "dockerfile-flags",
                f"`{at}`: RUN flags (--mount, --network) are not supported; remove them",
                ins.line,
            )
        elif ins.name in ("COPY", "ADD"):
            flags, sources = copy_args(ins.value)
            unknown = sorted({f.split("=", 1)[0] for f in flags} - {"--chown", "--chmod"})
            if unknown:
                what = "another image or stage" if unknown[0] == "--from" else "this flag"
                error(
                    "dockerfile-flags",
                    f"`{at}`: {unknown[0]} ({what}) is not supported; "
                    "copy local files of environment/, with at most --chown/--chmod",
                    ins.line,
                )
                continue
            for source in sources:
                _check_copy_source(ctx, task, ins, source, context_files, hidden)
    if froms == 0:
        error(
            "dockerfile-no-from",
            "has no FROM instruction; start with e.g. FROM debian:bookworm-slim",
        )


def _check_copy_source(
    ctx: _Ctx,
    task: _View,
    ins: Instruction,
    source: str,
    context_files: list[str],
    hidden: dict[str, tuple[str, bool]],
) -> None:
    assert task.dockerfile is not None
    dockerfile = task.dockerfile
    if re.match(r"^(?:https?|ftp|git)://|^git@", source):
        ctx.add(
            "dockerfile-remote-add",
            "error",
            dockerfile,
            f"{ins.name} {source}: remote sources are not supported; put the file in "
            "environment/ and COPY it",
            ins.line,
        )
        return
    norm = posixpath.normpath(source.lstrip("/")) if source.strip("/") else "."
    first = PurePosixPath(norm).parts[0] if norm != "." else "."
    if first == "..":
        ctx.add(
            "image-test-leak"
            if re.search(r"(^|/)\.\./(tests|solution)(/|$)", norm + "/")
            else "dockerfile-outside-context",
            "error",
            dockerfile,
            f"{ins.name} {source}: the build context is environment/, so this path is "
            "outside it. tests/ and solution/ are uploaded by Harbor only at verification "
            "time and must never be copied into the agent's image; copy only files of "
            "environment/",
            ins.line,
        )
        return
    name = PurePosixPath(norm).name
    if (
        first in ("tests", "solution")
        or name in ("test.sh", "solve.sh")
        or re.fullmatch(r"test_.*\.py", name)
    ):
        ctx.add(
            "image-test-leak",
            "error",
            dockerfile,
            f"{ins.name} {source}: copies test or solution files into the agent's image, "
            "where the agent can read them. Remove this COPY; Harbor uploads tests/ to "
            "/tests only after the agent has finished",
            ins.line,
        )
        return
    if "$" not in source and not _covered(source, context_files):
        ctx.add(
            "dockerfile-missing-source",
            "error",
            dockerfile,
            f"{ins.name} {source}: no such file in the build context environment/; add "
            f"environment/{norm} or fix the path",
            ins.line,
        )
        return
    for rel in _covered(source, context_files):
        leaked, answer = hidden.get(_digest(task.environment_dir / rel), ("", False))
        base = PurePosixPath(rel).name
        if leaked and not answer:
            ctx.add(
                "image-shares-test-file",
                "warning",
                dockerfile,
                f"{ins.name} {source}: environment/{rel} is identical to {leaked}, so the agent "
                "can read it. Fine for a shared input (e.g. a data generator); make sure it holds "
                "no expected output or check",
                ins.line,
            )
        elif (
            leaked or base in ("test.sh", "solve.sh") or rel.split("/")[0] in ("tests", "solution")
        ):
            what = f"a copy of {leaked}" if leaked else "a test or solution file"
            ctx.add(
                "image-test-leak",
                "error",
                dockerfile,
                f"{ins.name} {source}: brings environment/{rel} into the agent's image, "
                f"and it is {what}. Remove environment/{rel} (or exclude it from the COPY)",
                ins.line,
            )


# --------------------------------------------------------------------------- tests/ rules


def _test_sources(task: _View) -> list[tuple[Path, str]]:
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


def _reward_rule(ctx: _Ctx, task: _View, sources: list[tuple[Path, str]]) -> None:
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


def _workdir(task: _View) -> str:
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
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):  # shebangs and comments say, they do not check
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


def _outputs_named_rule(ctx: _Ctx, task: _View, sources: list[tuple[Path, str]]) -> None:
    """Every path the tests read must be named in instruction.md (TB review rubric, rule 1/4).

    Heuristic. Not flagged: system and Harbor paths (/tests, /logs, /usr, /tmp, ...), files
    shipped in environment/ (inputs, not outputs), tests/ files that are copies of those (shared
    generators), git internals, bare top-level folders, and any path whose full form,
    workdir-relative form or file name appears in the instruction.
    """
    instruction = task.instruction
    if not instruction or not instruction.strip():  # reported as a missing or empty file
        return
    workdir = _workdir(task)
    shipped = {p.name for p in task.environment_dir.rglob("*") if p.is_file()}
    reported: set[str] = set()
    shared = _shared_inputs(task)
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
                or (len(parts) == 1 and "." not in name)
                or full == workdir
                or workdir.startswith(full + "/")
                or name in shipped
                or name in _TASK_FILE_NAMES
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
                "in instruction.md — or stop checking it",
                line,
            )


# --------------------------------------------------------------------------- requirements


def _requirements_rule(ctx: _Ctx, task: _View) -> None:
    """requirements*.txt shipped with the task must pin with == (Harbor checks only pip lines)."""
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
                    "error",
                    path,
                    f"`{line}` is not pinned; write {requirement.name}==<version>",
                    number,
                )


# --------------------------------------------------------------------------- entry point


def _scrub(text: str, root: Path) -> str:
    """Messages name files relative to the task, never by their place on this machine."""
    for prefix in {str(root), str(root.resolve())}:
        text = text.replace(prefix + "/", "").replace(prefix, ".")
    return text


def lint_task(task_dir: Path | str, limits: TaskLimits | None = None) -> LintReport:
    """Run every static check on one task folder. Never raises for a bad task.

    Bounded: the folder is first checked against `TaskLimits` with one `lstat` walk (file count,
    sizes, special files, links, names); a task that breaks a limit gets only those findings.
    """
    root = Path(task_dir)
    limits = limits or TaskLimits()
    ctx = _Ctx(root.resolve() if root.exists() else root)
    problems = inventory(root, limits) if root.is_dir() and not root.is_symlink() else []
    for problem in problems:
        ctx.add("task-limits", "error", ctx.root / problem.file, problem.problem)
    format_errors = [] if problems else check_task(root, limits)
    for err in format_errors:
        message = f"{err.field}: {err.problem}" if err.field else err.problem
        rule = "task-limits" if "allowed range" in message or "must be finite" in message else None
        ctx.add(rule or "task-format", "error", err.path, _scrub(message, ctx.root))
    unparsable = any(
        "invalid TOML" in e.problem or "nested deeper" in e.problem for e in format_errors
    )
    if root.is_dir() and not problems and not unparsable:
        _harbor_rules(ctx, quiet=bool(format_errors))
        task = _View.of(ctx.root)
        _dockerfile_rules(ctx, task)
        sources = _test_sources(task)
        _reward_rule(ctx, task, sources)
        _outputs_named_rule(ctx, task, sources)
        _requirements_rule(ctx, task)
        ctx.findings += [LintFinding(**f) for f in hack_findings(ctx.root)]
    findings = sorted(
        ctx.findings, key=lambda f: (f.severity != "error", f.file, f.line or 0, f.rule)
    )
    return LintReport(
        task=str(task_dir),
        ok=not any(f.severity == "error" for f in findings),
        findings=findings,
    )
