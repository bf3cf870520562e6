"""Host values never enter a sandbox unless the user names them, and never come back out.

Harbor resolves `${VAR}` (and `${VAR:-default}`) in task.toml's `[environment.env]`,
`[solution.env]`, `[verifier.env]` (and header values) from the environment of the process
running the trial: a model-written task could read the run's API keys into its sandbox and see
them in the rejection excerpt. So:

- `host_templates(task.toml)`: every template naming a variable outside the run's allowlist
  (`Settings.task_env_allow`). Lint refuses them (`task-env-host-template`) and every sandbox
  start refuses them again (tools/sandbox/harbor_env.py), whatever the caller linted.
- `redact_host_values(text)`: the values of this process's environment replaced by their
  names, for everything a verdict or an excerpt carries back (allowlisted values included:
  the proposer may see that a variable was used, never its value).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..settings import get_settings
from .limits import toml_leaves

# Harbor's pattern is `\$\{([^}:]+)(?::-(.*))?\}` on whole values (and embedded in headers):
# here any `${` counts, whole value or not, so no spelling slips past.
_TEMPLATE = re.compile(r"\$\{([^}:]*)")
#: Host variables whose values are not secrets and show up in ordinary output (paths, locale).
PUBLIC_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "PWD",
        "OLDPWD",
        "SHELL",
        "TERM",
        "LANG",
        "LANGUAGE",
        "USER",
        "LOGNAME",
        "TZ",
        "TMPDIR",
        "SHLVL",
        "HOSTNAME",
        "_",
    }
)
#: Shorter values are not redacted (they would hit ordinary words and numbers).
MIN_REDACTED_CHARS = 8


class HostTemplate(BaseModel):
    """One `${VAR}` in task.toml: where (`environment.env.API_KEY`) and the variable."""

    where: str
    variable: str


def allowed() -> frozenset[str]:
    return frozenset(get_settings().task_env_allow)


def templates_in(raw: dict[str, Any], allow: Iterable[str] | None = None) -> list[HostTemplate]:
    """The templates of a parsed task.toml that name a variable outside `allow`."""
    allow = allowed() if allow is None else frozenset(allow)
    found = []
    for where, text in toml_leaves(raw):
        if not isinstance(text, str):
            continue
        for match in _TEMPLATE.finditer(text):
            if match[1] not in allow:
                found.append(HostTemplate(where=where, variable=match[1]))
    return found


def host_templates(task_dir: Path | str, allow: Iterable[str] | None = None) -> list[HostTemplate]:
    """`templates_in` of the task's task.toml; [] when it is missing or unreadable (lint and
    the format checks say why)."""
    try:
        raw = tomllib.loads((Path(task_dir) / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return []
    return templates_in(raw, allow)


def refusal(found: list[HostTemplate]) -> str:
    """One sentence naming the templates (never a value) and what to change."""
    named = ", ".join(f"{t.where} = ${{{t.variable}}}" for t in found[:5])
    return (
        f"task.toml takes values from the host's environment ({named}): a task gets no host "
        "variable unless the run allows it by name (AUTOENVSCALING_TASK_ENV_ALLOW); write the "
        "value itself, or drop the variable"
    )


def redact_host_values(text: str) -> str:
    """`text` with each host variable's value (of MIN_REDACTED_CHARS or more, names in
    PUBLIC_NAMES aside) replaced by `<host:NAME>`, longest first."""
    if not text:
        return text
    values = sorted(
        (
            (value, name)
            for name, value in os.environ.items()
            if name not in PUBLIC_NAMES and len(value) >= MIN_REDACTED_CHARS
        ),
        key=lambda pair: -len(pair[0]),
    )
    for value, name in values:
        if value in text:
            text = text.replace(value, f"<host:{name}>")
    return text
