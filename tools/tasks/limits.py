"""Hard limits on what a task folder may hold and ask for, checked before anything reads it whole.

A proposer's task is hostile input. Two checks run first, in bounded time and memory:

- `inventory(root)`: one `lstat` walk that stops at the first `max_files` entries. It refuses
  special files (FIFOs, sockets, devices), symlinks, setuid/setgid files, hard links, files or a folder total over the size caps,
  folders nested too deep and names a shell or a terminal would misread. Nothing is opened.
- `check_numbers(raw)`: every number of task.toml must be finite, and the ones that size a trial
  (timeouts, cpus, memory, storage, gpus) must lie in the configured range, so a task can never
  ask the gate for an unbounded wait or a machine it cannot have.

Every problem names the file or field, the value, and what is allowed.
"""

from __future__ import annotations

import math
import os
import stat
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["LimitProblem", "TaskLimits", "check_numbers", "inventory", "toml_depth", "toml_leaves"]


class TaskLimits(BaseSettings):
    """The largest task the gate accepts. Environment fallback: `AUTOENVSCALING_TASK_<FIELD>`."""

    model_config = SettingsConfigDict(env_prefix="AUTOENVSCALING_TASK_", extra="forbid")

    max_files: int = Field(default=2000, ge=1, description="Most files and folders in one task.")
    max_total_bytes: int = Field(default=50_000_000, ge=1, description="Largest sum of file sizes.")
    max_file_bytes: int = Field(default=20_000_000, ge=1, description="Largest single file.")
    max_instruction_bytes: int = Field(default=100_000, ge=1, description="Largest instruction.md.")
    max_toml_bytes: int = Field(default=65_536, ge=1, description="Largest task.toml.")
    max_toml_depth: int = Field(
        default=8, ge=1, description="Deepest nesting of tables and arrays."
    )
    max_depth: int = Field(
        default=16, ge=1, description="Deepest folder nesting below the task root."
    )
    max_name_bytes: int = Field(default=200, ge=1, description="Longest file or folder name.")
    # Real Terminal-Bench 2 tasks ask for up to 12,000 s for the agent and the verifier. The gate's
    # own wall cap on a trial (GateConfig.max_trial_sec) bounds what a trial really gets.
    max_agent_timeout_sec: float = Field(
        default=12_000.0, gt=0, description="[agent].timeout_sec cap."
    )
    max_verifier_timeout_sec: float = Field(
        default=12_000.0, gt=0, description="[verifier].timeout_sec cap."
    )
    max_build_timeout_sec: float = Field(
        default=1800.0, gt=0, description="[environment].build_timeout_sec cap."
    )
    max_cpus: float = Field(default=8.0, gt=0, description="[environment].cpus cap.")
    min_memory_mb: int = Field(default=64, ge=1, description="Least [environment].memory_mb.")
    max_memory_mb: int = Field(default=16_384, ge=1, description="[environment].memory_mb cap.")
    min_storage_mb: int = Field(default=64, ge=1, description="Least [environment].storage_mb.")
    max_storage_mb: int = Field(default=65_536, ge=1, description="[environment].storage_mb cap.")
    max_gpus: int = Field(default=0, ge=0, description="[environment].gpus cap (0: no GPU tasks).")


class LimitProblem(BaseModel):
    """One limit a task breaks: `file` relative to the task root, `field` for task.toml keys."""

    file: str
    field: str | None = None
    problem: str


# --------------------------------------------------------------------------- the folder


def _kind(mode: int) -> str | None:
    """A name for a file type a task must not hold; None for regular files and folders."""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return "a special file"
    return None


def _privilege(info: os.stat_result) -> str | None:
    """Why a regular file may carry privilege off the machine that made it; None if it cannot.

    A setuid/setgid file copied out of a sandbox runs with its owner's rights on the host; a
    hard link shares its inode (and later mode changes) with a name outside the task."""
    if info.st_mode & (stat.S_ISUID | stat.S_ISGID):
        return (
            "has the setuid or setgid bit; a task's files carry no privilege (chmod u-s,g-s "
            "it; set such bits in the Dockerfile if the image needs them)"
        )
    if info.st_nlink > 1:
        return (
            f"is a hard link ({info.st_nlink} names share its data, maybe outside the task); "
            "make it a plain copy"
        )
    return None


def _bad_name(name: str, limits: TaskLimits) -> str | None:
    try:
        encoded = name.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes surface as lone surrogates
        return "is not valid UTF-8"
    if len(encoded) > limits.max_name_bytes:
        return f"is {len(encoded)} bytes long, over the {limits.max_name_bytes}-byte limit"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in name):
        return "holds control or invisible characters (newline, tab, escape, bidi marks)"
    if "\\" in name:
        return "holds a backslash"
    if name.strip() != name or name.startswith("-"):
        return "starts with '-' or starts or ends with whitespace"
    return None


def _shown(rel: str) -> str:
    """A name safe to print: control characters escaped, long names cut."""
    text = rel.encode("utf-8", "backslashreplace").decode("utf-8")
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    return text if len(text) <= 80 else text[:77] + "..."


def _walk(root: Path) -> Iterator[tuple[str, os.stat_result, int]]:
    """(relative path, lstat, depth) of every entry, breadth-first, never following a link."""
    queue: list[tuple[str, int]] = [("", 0)]
    while queue:
        rel, depth = queue.pop(0)
        with os.scandir(root / rel if rel else root) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                child = f"{rel}/{entry.name}" if rel else entry.name
                info = entry.stat(follow_symlinks=False)
                yield child, info, depth + 1
                if stat.S_ISDIR(info.st_mode):
                    queue.append((child, depth + 1))


def inventory(root: Path | str, limits: TaskLimits | None = None) -> list[LimitProblem]:
    """Every limit the folder breaks, found with one bounded `lstat` walk (nothing is read)."""
    limits = limits or TaskLimits()
    root = Path(root)
    problems: list[LimitProblem] = []
    count = total = 0
    try:
        for rel, info, depth in _walk(root):
            count += 1
            if count > limits.max_files:
                problems.append(
                    LimitProblem(
                        file=".",
                        problem=f"holds more than {limits.max_files} files and folders; "
                        "a task needs far fewer (generate large inputs in the Dockerfile)",
                    )
                )
                break
            name = rel.rsplit("/", 1)[-1]
            if (why := _bad_name(name, limits)) is not None:
                problems.append(
                    LimitProblem(
                        file=_shown(rel),
                        problem=f"the name {why}; use short names of letters, digits, '.', '_', '-'",
                    )
                )
            if (kind := _kind(info.st_mode)) is not None:
                problems.append(
                    LimitProblem(
                        file=_shown(rel),
                        problem=f"is {kind}; a task holds only regular files and folders "
                        "(create pipes, sockets, devices or links in the Dockerfile or at run time)",
                    )
                )
                continue
            if depth > limits.max_depth:
                problems.append(
                    LimitProblem(
                        file=_shown(rel),
                        problem=f"is nested {depth} folders deep, over the limit of "
                        f"{limits.max_depth}",
                    )
                )
                break
            if stat.S_ISREG(info.st_mode) and (why := _privilege(info)) is not None:
                problems.append(LimitProblem(file=_shown(rel), problem=why))
            if stat.S_ISREG(info.st_mode):
                total += info.st_size
                if info.st_size > limits.max_file_bytes:
                    problems.append(
                        LimitProblem(
                            file=_shown(rel),
                            problem=f"is {info.st_size:,} bytes, over the "
                            f"{limits.max_file_bytes:,}-byte limit for one file; generate "
                            "large data in the Dockerfile instead",
                        )
                    )
        if total > limits.max_total_bytes:
            problems.append(
                LimitProblem(
                    file=".",
                    problem=f"files total {total:,} bytes, over the {limits.max_total_bytes:,}-"
                    "byte limit for a task",
                )
            )
    except OSError as exc:  # unreadable folder (permissions, a race): a specific problem
        problems.append(
            LimitProblem(file=".", problem=f"cannot be read: {exc.strerror or type(exc).__name__}")
        )
    for name, cap in (
        ("instruction.md", limits.max_instruction_bytes),
        ("task.toml", limits.max_toml_bytes),
    ):
        try:
            info = os.lstat(root / name)
        except OSError:
            continue  # a missing file is reported by the format checks
        if stat.S_ISREG(info.st_mode) and info.st_size > cap:
            problems.append(
                LimitProblem(
                    file=name, problem=f"is {info.st_size:,} bytes, over the {cap:,}-byte limit"
                )
            )
    return problems


# --------------------------------------------------------------------------- task.toml


def toml_depth(value: Any, limit: int) -> int:
    """Nesting depth of parsed TOML, counted only up to `limit + 1` (bounded work)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _ranges(limits: TaskLimits) -> dict[str, tuple[float, float, bool]]:
    """Dotted field -> (low, high, low is exclusive)."""
    return {
        "agent.timeout_sec": (0, limits.max_agent_timeout_sec, True),
        "verifier.timeout_sec": (0, limits.max_verifier_timeout_sec, True),
        "environment.build_timeout_sec": (0, limits.max_build_timeout_sec, True),
        "environment.cpus": (0, limits.max_cpus, True),
        "environment.memory_mb": (limits.min_memory_mb, limits.max_memory_mb, False),
        "environment.storage_mb": (limits.min_storage_mb, limits.max_storage_mb, False),
        "environment.gpus": (0, limits.max_gpus, False),
        "environment.healthcheck.interval_sec": (0, limits.max_build_timeout_sec, True),
        "environment.healthcheck.timeout_sec": (0, limits.max_build_timeout_sec, True),
        "environment.healthcheck.start_period_sec": (0, limits.max_build_timeout_sec, False),
        "environment.healthcheck.start_interval_sec": (0, limits.max_build_timeout_sec, True),
        "environment.healthcheck.retries": (0, 100, False),
        "verifier.environment.build_timeout_sec": (0, limits.max_build_timeout_sec, True),
        "verifier.environment.cpus": (0, limits.max_cpus, True),
        "verifier.environment.memory_mb": (limits.min_memory_mb, limits.max_memory_mb, False),
        "verifier.environment.storage_mb": (limits.min_storage_mb, limits.max_storage_mb, False),
        "verifier.environment.gpus": (0, limits.max_gpus, False),
    }


def _setting(field: str) -> str | None:
    """The TaskLimits field (and its environment variable) that sets `field`'s cap."""
    leaf = field.removeprefix("verifier.environment.").removeprefix("environment.")
    name = {
        "agent.timeout_sec": "max_agent_timeout_sec",
        "verifier.timeout_sec": "max_verifier_timeout_sec",
        "build_timeout_sec": "max_build_timeout_sec",
        "cpus": "max_cpus",
        "memory_mb": "max_memory_mb",
        "storage_mb": "max_storage_mb",
        "gpus": "max_gpus",
    }.get(leaf)
    if name is None and leaf.startswith("healthcheck.") and leaf.endswith("_sec"):
        name = "max_build_timeout_sec"
    return name


def toml_leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every scalar of a parsed TOML value with its path (`environment.env.API_KEY`, `a[0]`)."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from toml_leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from toml_leaves(item, f"{path}[{i}]")
    else:
        yield path, value


def check_numbers(raw: dict[str, Any], limits: TaskLimits | None = None) -> list[LimitProblem]:
    """Every number of task.toml finite; the ones that size a trial inside their range.

    `raw` must already be depth-checked (`toml_depth`). A deprecated `memory = "2G"` string is
    checked after conversion by the config model; its numeric twin `memory_mb` is checked here.
    """
    limits = limits or TaskLimits()
    ranges = _ranges(limits)
    problems: list[LimitProblem] = []
    for field, value in toml_leaves(raw):
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        shown = f"{value!r}"
        if isinstance(value, float) and not math.isfinite(value):
            problems.append(
                LimitProblem(
                    file="task.toml",
                    field=field,
                    problem=f"is {shown}; every number in task.toml must be finite",
                )
            )
            continue
        if field not in ranges:
            continue
        low, high, exclusive = ranges[field]
        if (value <= low if exclusive else value < low) or value > high:
            bound = f"> {low:g}" if exclusive else f">= {low:g}"
            advice = "set a value in range"
            if value > high and (setting := _setting(field)):
                # The cap is this gate's choice, not the task's fault: say how to move it.
                advice += (
                    f", or raise this gate's cap: AUTOENVSCALING_TASK_{setting.upper()}="
                    f"{value:g} (TaskLimits.{setting})"
                )
            problems.append(
                LimitProblem(
                    file="task.toml",
                    field=field,
                    problem=f"is {shown}, outside the allowed range ({bound} and <= {high:g}); "
                    f"{advice}",
                )
            )
    return problems
