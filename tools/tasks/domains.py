"""The four kinds of environment the project builds (the paper's domains), read from task tags.

A task names its domain in `[metadata] tags`, as one of `DOMAINS`; a task that names none (every
task written before domains existed, a proposer's task that forgot) is `software`. The round
report counts proposals, admissions and solve rates per domain with these readers, and the
proposer's brief names the four.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal, get_args

from .format import HarborTask
from .limits import TaskLimits

Domain = Literal["software", "professional-work", "computer-use", "kernels"]
DOMAINS: tuple[Domain, ...] = get_args(Domain)
DEFAULT_DOMAIN: Domain = "software"

#: One line per domain for the proposer's brief: what a task of that kind asks for.
DOMAIN_BLURBS: dict[Domain, str] = {
    "software": "shell, git, builds, debugging, data wrangling in code",
    "professional-work": "office documents: spreadsheets, word processing, PDFs, calendars",
    "computer-use": "drive a graphical or full-screen terminal application",
    "kernels": "make a numerical kernel correct and fast (speed measured against a reference)",
}


def domain_of_tags(tags: object) -> Domain:
    """The first tag that names a domain; `software` when none does (or tags is not a list)."""
    if isinstance(tags, list | tuple):
        for tag in tags:
            if tag in DOMAINS:
                return tag
    return DEFAULT_DOMAIN


def task_domain(task: HarborTask) -> Domain:
    """The domain of a loaded task."""
    return domain_of_tags(task.config.metadata.get("tags"))


def folder_domain(folder: Path | str) -> Domain | None:
    """The domain a task folder's task.toml names; `software` for a readable task.toml that names
    none; None when there is no readable task.toml (a proposal that never wrote one, or one larger
    than the gate reads). Reads only that file, so a candidate the format checks reject still has
    a domain."""
    path = Path(folder) / "task.toml"
    try:
        if path.is_symlink() or path.stat().st_size > TaskLimits().max_toml_bytes:
            return None  # a proposer's file: read only what the gate would read
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return None
    metadata = raw.get("metadata")
    return domain_of_tags(metadata.get("tags") if isinstance(metadata, dict) else None)


def needs_desktop(folder: Path | str) -> bool:
    """Whether a task's solver gets the desktop tools beside the terminal (a computer-use task):
    the served solver binds them (graphs/solver/harbor_agent.py), a GRPO episode has them
    (training/grpo/desktop_episode.py) and an SFT replay records them (graphs/cold_start/solver_replay.py)."""
    return folder_domain(folder) == "computer-use"
