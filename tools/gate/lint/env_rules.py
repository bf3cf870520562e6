"""Lint rule for host values: a task.toml `${VAR}` template outside the run's allowlist."""

from __future__ import annotations

from ...tasks.host_env import host_templates, refusal
from .model import LintContext


def check_host_env(ctx: LintContext) -> None:
    """`task-env-host-template`: Harbor would fill the template from this process's environment
    (API keys included) and hand it to the sandbox."""
    found = host_templates(ctx.root)
    if found:
        ctx.add("task-env-host-template", "error", ctx.root / "task.toml", refusal(found))
