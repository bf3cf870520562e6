"""Harbor's adapter: the one module that touches private parts of Harbor (tests/test_public_apis.py).

Two contacts have no public door in Harbor 0.25, and tests/test_adapters.py fails when an upgrade
moves or reshapes either:
- **`BaseEnvironment`'s protected helpers.** A custom environment (ours: tools/sandbox/harbor_env.py)
  subclasses `BaseEnvironment`, whose public contract is its abstract methods; the rules it must
  follow inside them — the task's resources after the trial's overrides and resource modes, the
  exec environment (persistent < per-exec < scoped), the default user, the start-up environment,
  the prebuilt-image upload — live in underscore helpers that Harbor's own environments call.
  Re-implementing them would drift from Harbor; calling them from here keeps one place to look.
- **Harbor lint's Dockerfile parser** (`harbor.lint.task`): which packages a `pip install` line
  leaves unpinned, to name them in our message (tools/gate/lint/harbor_rules.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harbor.environments.base import BaseEnvironment

# ------------------------------------------------------------------ BaseEnvironment's helpers


def resources(environment: BaseEnvironment) -> tuple[int | None, int | float | None, int | None]:
    """(memory MB, cpus, storage MB) the trial grants the task: its config after the trial's
    overrides and the environment's resource modes; None where nothing is set."""
    return (
        environment._effective_memory_mb,
        environment._effective_cpus,
        environment._effective_storage_mb,
    )


def exec_env(environment: BaseEnvironment, env: dict[str, str] | None) -> dict[str, str] | None:
    """The environment of one exec: persistent < this exec's `env` < scoped overlays."""
    return environment._merge_env(env)


def exec_user(environment: BaseEnvironment, user: str | int | None) -> str | int | None:
    """The user of one exec: `user`, else the environment's default user."""
    return environment._resolve_user(user)


def startup_env(environment: BaseEnvironment) -> dict[str, str]:
    """The task's and the trial's environment variables for creating the sandbox."""
    return dict(environment._startup_env())


async def upload_environment_dir(environment: BaseEnvironment) -> None:
    """Harbor's end of `start()`: a prebuilt-image task's `environment/` into its workdir."""
    await environment._upload_environment_dir_after_start()


# ----------------------------------------------------------------------- Harbor lint's parser


def pip_install_packages(dockerfile: Path, line: int) -> Iterator[tuple[list[str], list[str]]]:
    """For each shell command on Dockerfile `line` (continuations joined, as Harbor reads it):
    (its words, the packages it installs that Harbor calls unpinned). Raises ImportError when
    this Harbor has no such parser, OSError when the file cannot be read."""
    # lazy: Harbor's private parser; where this Harbor has none, the ImportError is the caller's
    from harbor.lint.task import _commands, _lines, _packages, _unpinned

    text = dict(_lines(dockerfile.read_text(encoding="utf-8"))).get(line, "")
    for command, _ in _commands(_RUN.sub("", text)):
        yield command, [p for p in _packages(command) if _unpinned(p)]


_RUN = re.compile(r"^\s*RUN\s+(?:--\S+\s+)*", re.IGNORECASE)  # the instruction and its flags
