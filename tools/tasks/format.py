"""The Harbor task model: load, validate and write Terminal-Bench 2 task folders.

Harbor's own pydantic `TaskConfig` is the schema of task.toml; this module adds the folder
checks Harbor leaves to run time (files present, UTF-8, shebangs) and turns every failure into a
`TaskFormatError` that names the file, the field and what to change — never a raw traceback.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tomllib
import warnings
from pathlib import Path, PurePosixPath

from harbor.lint import LintRule
from harbor.lint import lint_task as harbor_lint_task
from harbor.models.task.config import TaskConfig, TaskOS
from harbor.models.task.paths import TaskPaths
from harbor.models.task.task import strip_canary
from harbor.utils.path_safety import validate_input_tree
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from .limits import TaskLimits, check_numbers, inventory, toml_depth

__all__ = [
    "HarborTask",
    "TaskFormatError",
    "TaskSpec",
    "check_task",
    "load_pool",
    "load_task",
    "write_task",
]

# Unknown keys under these tables change nothing Harbor runs: package info ([task] format,
# workstream, ...) and the steps of a multi-step task (reported once, as multi-step).
_DESCRIPTIVE_TABLES = ("task.", "steps")

# Files that never belong to a task's identity (editor and interpreter droppings).
_IGNORED_NAMES = {".git", "__pycache__", ".DS_Store", ".pytest_cache"}


class TaskFormatError(ValueError):
    """A task folder is malformed. `str(err)` is "FILE: FIELD: PROBLEM" (FIELD omitted if None)."""

    def __init__(self, path: Path | str, field: str | None, problem: str):
        self.path = Path(path)
        self.field = field
        self.problem = problem
        where = f"{self.path}: {field}" if field else str(self.path)
        super().__init__(f"{where}: {problem}")

    def __reduce__(self):  # keep picklable across process pools
        return (type(self), (self.path, self.field, self.problem))


class HarborTask(BaseModel):
    """A validated single-step Harbor task folder. Build it with `load_task`."""

    model_config = ConfigDict(frozen=True)

    root: Path
    name: str
    config: TaskConfig
    instruction: str = Field(description="instruction.md with canary lines stripped")
    environment_dir: Path
    dockerfile: Path | None = Field(description="None when [environment].docker_image is used")
    tests_dir: Path
    test_script: Path
    solution_dir: Path | None
    solve_script: Path | None

    @property
    def category(self) -> str | None:
        value = self.config.metadata.get("category")
        return str(value) if value is not None else None

    @property
    def difficulty(self) -> str | None:
        value = self.config.metadata.get("difficulty")
        return str(value) if value is not None else None

    def files(self) -> list[Path]:
        """Every regular file of the task, sorted by relative path."""
        return _task_files(self.root)

    def content_hash(self) -> str:
        """sha256 over relative paths, exec bits and bytes of every file: same folder, same hash."""
        digest = hashlib.sha256()
        for path in self.files():
            rel = path.relative_to(self.root).as_posix()
            executable = b"x" if os.access(path, os.X_OK) else b"-"
            data = path.read_bytes()
            digest.update(f"{rel}\0{len(data)}\0".encode() + executable + b"\0")
            digest.update(data)
        return digest.hexdigest()


class TaskSpec(BaseModel):
    """The files of a task, as a proposer writes them. Keys of the dicts are relative paths."""

    instruction: str
    task_toml: str | None = Field(default=None, description="raw task.toml text")
    config: TaskConfig | None = Field(default=None, description="used when task_toml is None")
    dockerfile: str | None = Field(default=None, description="environment/Dockerfile")
    environment_files: dict[str, str | bytes] = Field(
        default_factory=dict, description="other files of the build context environment/"
    )
    tests: dict[str, str | bytes] = Field(description="tests/ files; must hold test.sh")
    solution: dict[str, str | bytes] = Field(default_factory=dict, description="solution/ files")

    @field_validator("environment_files", "tests", "solution")
    @classmethod
    def _relative_paths(cls, files: dict[str, str | bytes]) -> dict[str, str | bytes]:
        for name in files:
            parts = PurePosixPath(name).parts
            if not parts or PurePosixPath(name).is_absolute() or ".." in parts or "\\" in name:
                raise ValueError(
                    f"file name {name!r} must be a relative path inside the folder "
                    "(no leading '/', no '..', forward slashes)"
                )
        return files

    @model_validator(mode="after")
    def _one_config(self) -> TaskSpec:
        if self.task_toml is not None and self.config is not None:
            raise ValueError("give either task_toml or config, not both")
        return self

    def toml_text(self) -> str:
        if self.task_toml is not None:
            return self.task_toml
        return (self.config or TaskConfig()).model_dump_toml()


# --------------------------------------------------------------------------- helpers


def _task_files(root: Path) -> list[Path]:
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in _IGNORED_NAMES)
        for name in filenames:
            path = Path(dirpath) / name
            if name not in _IGNORED_NAMES and not name.endswith(".pyc") and path.is_file():
                out.append(path)
    return sorted(out, key=lambda p: p.relative_to(root).as_posix())


def _read_text(path: Path, errors: list[TaskFormatError], what: str) -> str | None:
    """Read a required UTF-8 file, recording a specific error instead of raising."""
    if not path.exists():
        errors.append(TaskFormatError(path, None, f"missing; {what}"))
        return None
    if not path.is_file():
        errors.append(TaskFormatError(path, None, "is not a regular file"))
        return None
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        errors.append(
            TaskFormatError(
                path,
                None,
                f"is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                "save the file as UTF-8",
            )
        )
        return None


def _check_script(path: Path, text: str, errors: list[TaskFormatError]) -> None:
    # No shebang is fine: Harbor runs the script from a bash command line, and bash runs a file
    # without one as a bash script (lint warns). CRLF breaks the shebang and every command.
    if text.split("\n", 1)[0].endswith("\r"):
        errors.append(
            TaskFormatError(path, "line endings", "uses CRLF line endings; convert to LF")
        )


def _validation_problem(exc: ValidationError) -> tuple[str, str]:
    """First pydantic error as (dotted field, readable problem)."""
    error = exc.errors(include_url=False, include_context=False)[0]
    field = ".".join(str(part) for part in error["loc"]) or "(top level)"
    problem = error["msg"]
    if "input" in error and not isinstance(error["input"], dict | list):
        problem += f" (got {error['input']!r})"
    return field, problem


def _unknown_fields(root: Path) -> list[tuple[str, str]]:
    """Unknown task.toml keys, via Harbor's own lint rule: [(field, message)]."""
    try:
        findings = harbor_lint_task(root, selected_rules={LintRule.UNKNOWN_CONFIG_FIELD})
    except (OSError, ValueError, RuntimeError):  # the other checks report what broke the walk
        return []
    out = []
    for finding in findings:
        match = re.search(r"Unknown field '([^']+)'", finding.message)
        out.append((match.group(1) if match else "", finding.message))
    return out


def _parse_toml(path: Path, text: str, limits: TaskLimits) -> tuple[dict | None, str | None]:
    """(parsed task.toml, None) or (None, why it cannot be used); never raises."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, f"invalid TOML: {exc}"
    except RecursionError:  # tomllib recurses once per nested array or inline table
        return None, (
            f"invalid TOML: arrays or tables nested deeper than {limits.max_toml_depth} levels"
        )
    if toml_depth(raw, limits.max_toml_depth) > limits.max_toml_depth:
        return None, (
            f"tables and arrays are nested deeper than {limits.max_toml_depth} levels; "
            "task.toml needs at most a few"
        )
    return raw, None


def _check_config(
    root: Path, errors: list[TaskFormatError], limits: TaskLimits
) -> TaskConfig | None:
    path = root / TaskPaths.CONFIG_FILENAME
    text = _read_text(path, errors, 'add task.toml (Harbor task config, schema_version "1.4")')
    if text is None:
        return None
    raw, problem = _parse_toml(path, text, limits)
    if raw is None:
        errors.append(TaskFormatError(path, None, problem or "invalid TOML"))
        return None
    numbers = check_numbers(raw, limits)
    errors.extend(TaskFormatError(path, p.field, p.problem) for p in numbers)
    for field, message in _unknown_fields(root):
        if field.startswith(_DESCRIPTIVE_TABLES):
            continue  # Harbor ignores them and so does the run; lint warns (harbor_compat.py)
        advice = message.split("; ", 1)[-1]  # "remove or correct it. Did you mean 'x'?"
        errors.append(TaskFormatError(path, field or None, f"unknown field; {advice}"))
    try:
        with warnings.catch_warnings():  # deprecated keys (memory = "2G") are accepted
            warnings.simplefilter("ignore")
            config = TaskConfig.model_validate(raw)
    except ValidationError as exc:
        field, problem = _validation_problem(exc)
        errors.append(TaskFormatError(path, field, problem))
        return None
    except (ValueError, TypeError) as exc:
        errors.append(TaskFormatError(path, None, str(exc)))
        return None
    if not numbers:  # deprecated size strings (memory = "2G") become numbers only here
        dumped = config.model_dump(mode="python", include={"agent", "verifier", "environment"})
        for p in check_numbers(dumped, limits):
            errors.append(TaskFormatError(path, p.field, p.problem))
    if config.steps:
        names = ", ".join(step.name for step in config.steps)
        errors.append(
            TaskFormatError(
                path,
                "steps",
                f"a multi-step task ({len(config.steps)} [[steps]]: {names}) cannot be honoured "
                "here: the gate and its trials run one agent phase and one verifier. Run it with "
                "`harbor run`, or make it one step (instruction.md, tests/test.sh and "
                "solution/solve.sh at the top of the task)",
            )
        )
    if config.environment.os != TaskOS.LINUX:
        errors.append(TaskFormatError(path, "environment.os", "only 'linux' tasks are supported"))
    return config


def _inspect(
    root: Path, limits: TaskLimits | None = None
) -> tuple[HarborTask | None, list[TaskFormatError]]:
    errors: list[TaskFormatError] = []
    limits = limits or TaskLimits()
    if not root.exists():
        return None, [TaskFormatError(root, None, "task folder does not exist")]
    if root.is_symlink() or not root.is_dir():
        return None, [TaskFormatError(root, None, "is not a folder; a task is a folder")]
    root = root.resolve()
    paths = TaskPaths(root)
    # Bounded first: nothing below reads a file before the folder is known to be small and plain.
    problems = inventory(root, limits)
    if problems:
        return None, [TaskFormatError(root / p.file, p.field, p.problem) for p in problems]

    config = _check_config(root, errors, limits)
    if config is not None and config.steps:
        return None, errors  # its files live under steps/<name>/: the steps error says it all

    instruction = _read_text(
        paths.instruction_path, errors, "add instruction.md telling the agent what to do"
    )
    if instruction is not None:
        instruction = strip_canary(instruction)
        if not instruction.strip():
            errors.append(
                TaskFormatError(
                    paths.instruction_path,
                    None,
                    "is empty; describe the task, naming every file the tests check",
                )
            )

    dockerfile: Path | None = paths.environment_dir / "Dockerfile"
    docker_image = config.environment.docker_image if config else None
    if docker_image and not dockerfile.exists():
        dockerfile = None
    elif config is not None or dockerfile.exists():
        _read_text(
            dockerfile,
            errors,
            "add environment/Dockerfile or set [environment].docker_image in task.toml",
        )

    test_text = _read_text(
        paths.test_path,
        errors,
        "add tests/test.sh: it runs the checks and writes /logs/verifier/reward.txt",
    )
    if test_text is not None:
        _check_script(paths.test_path, test_text, errors)

    solution_dir: Path | None = paths.solution_dir if paths.solution_dir.exists() else None
    solve_script: Path | None = None
    if solution_dir is not None:
        solve_script = paths.solve_path
        solve_text = _read_text(
            solve_script,
            errors,
            "solution/ exists, so add solution/solve.sh (the oracle runs it) or remove solution/",
        )
        if solve_text is not None:
            _check_script(solve_script, solve_text, errors)

    for folder in (paths.environment_dir, paths.tests_dir, paths.solution_dir):
        try:
            validate_input_tree(folder, root)
        except (ValueError, OSError, RuntimeError) as exc:
            errors.append(TaskFormatError(folder, None, f"{exc}; use regular files, not links"))

    if errors or config is None or instruction is None:
        return None, errors
    return (
        HarborTask(
            root=root,
            name=config.task.name if config.task else root.name,
            config=config,
            instruction=instruction,
            environment_dir=paths.environment_dir,
            dockerfile=dockerfile,
            tests_dir=paths.tests_dir,
            test_script=paths.test_path,
            solution_dir=solution_dir,
            solve_script=solve_script,
        ),
        [],
    )


# --------------------------------------------------------------------------- public API


def check_task(path: Path | str, limits: TaskLimits | None = None) -> list[TaskFormatError]:
    """Every format problem of a task folder (empty when it loads)."""
    try:
        return _inspect(Path(path), limits)[1]
    except OSError as exc:  # permissions, races: still a specific, typed error
        return [TaskFormatError(exc.filename or path, None, exc.strerror or str(exc))]


def load_task(path: Path | str, limits: TaskLimits | None = None) -> HarborTask:
    """Load and validate one task folder; raises the first `TaskFormatError` found."""
    try:
        task, errors = _inspect(Path(path), limits)
    except OSError as exc:
        raise TaskFormatError(exc.filename or path, None, exc.strerror or str(exc)) from None
    if errors:
        raise errors[0]
    assert task is not None
    return task


def write_task(spec: TaskSpec, dest: Path | str, *, overwrite: bool = False) -> HarborTask:
    """Write `spec` as a task folder at `dest`, then load it (so a bad spec raises here)."""
    dest = Path(dest)
    if dest.exists():
        if not overwrite and any(dest.iterdir()):
            raise TaskFormatError(
                dest, None, "already exists and is not empty; pass overwrite=True"
            )
        shutil.rmtree(dest)

    def put(rel: str, content: str | bytes) -> None:
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8") if isinstance(content, str) else content
        path.write_bytes(data)
        if rel.endswith(".sh") or data.startswith(b"#!"):
            path.chmod(0o755)

    dest.mkdir(parents=True)
    put("instruction.md", spec.instruction)
    put("task.toml", spec.toml_text())
    (dest / "environment").mkdir()
    if spec.dockerfile is not None:
        put("environment/Dockerfile", spec.dockerfile)
    for folder, files in (
        ("environment", spec.environment_files),
        ("tests", spec.tests),
        ("solution", spec.solution),
    ):
        for rel, content in files.items():
            put(f"{folder}/{rel}", content)
    return load_task(dest)


def load_pool(root: Path | str, errors: list[TaskFormatError] | None = None) -> list[HarborTask]:
    """Load every task folder directly under `root` (sorted by name).

    Broken tasks are skipped; their first error is appended to `errors` when given.
    """
    root = Path(root)
    if not root.is_dir():
        raise TaskFormatError(root, None, "task pool folder does not exist")
    tasks: list[HarborTask] = []
    for child in sorted(root.iterdir()):
        if not child.is_dir() or child.name.startswith(".") or child.name in _IGNORED_NAMES:
            continue
        try:
            tasks.append(load_task(child))
        except TaskFormatError as exc:
            if errors is not None:
                errors.append(exc)
    return tasks
