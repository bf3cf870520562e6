"""What real Harbor / Terminal-Bench tasks write that Harbor runs, and what this gate can honour.

Warnings (Harbor runs the task; the verdict still says so, never silently):
- `shebang`: solve.sh / test.sh without `#!`. Harbor runs both from a bash command line, and
  bash runs a file without a shebang as a bash script (TB2 solve.sh files start with a comment).
- `descriptive-field`: keys of `[task]` that Harbor's package info does not know (`format`,
  `workstream`, ...); Harbor ignores them, so does every trial.
- `needs-network`: a command that fetches from the internet (`network.py`), with its phase.
- `mcp-servers` / `skills-dir`: fields our solver agent does not use; calibration measures it
  without them.

Errors, `cannot-honour` — fields a trial here cannot give the task, naming what would:
`[environment] gpus > 0`, `tpu`, and a compose file on our container backends (one container
per task, no compose), each with the backend that would run it.
"""

from __future__ import annotations

import re
import tomllib

from harbor.lint import LintRule
from harbor.lint import lint_task as harbor_lint_task

from ..network import network_need
from .model import LintContext, TaskView

#: Backends that run one container of our own per task (no compose, no GPU passed through).
OUR_BACKENDS = ("podman", "docker")
_COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")


def check_shebangs(ctx: LintContext, task: TaskView) -> None:
    scripts = [task.test_script, task.solution_dir / "solve.sh" if task.solution_dir else None]
    for script in scripts:
        if script is None or not script.is_file():
            continue
        try:
            first = script.read_text(encoding="utf-8").split("\n", 1)[0]
        except (OSError, UnicodeDecodeError):
            continue  # the format checks report an unreadable script
        if not first.startswith("#!"):
            ctx.add(
                "shebang",
                "warning",
                script,
                "has no shebang: Harbor runs it through bash, which runs it as a bash script, so "
                "it works; add '#!/bin/bash' as its first line so it also runs on its own",
            )


def check_descriptive_fields(ctx: LintContext) -> None:
    try:
        findings = harbor_lint_task(ctx.root, selected_rules={LintRule.UNKNOWN_CONFIG_FIELD})
    except (OSError, ValueError, RuntimeError):
        return  # the format checks report what made the config unreadable
    for finding in findings:
        match = re.search(r"Unknown field '(task\.[^']+)'", finding.message)
        if match:
            ctx.add(
                "descriptive-field",
                "warning",
                ctx.root / "task.toml",
                f"{match.group(1)}: not a field of Harbor's [task] package info; Harbor ignores "
                "it and so does the gate (keep free-form facts under [metadata])",
            )


def _raw_config(ctx: LintContext) -> dict:
    try:
        return tomllib.loads((ctx.root / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return {}


def check_agent_fields(ctx: LintContext) -> None:
    environment = _raw_config(ctx).get("environment")
    if not isinstance(environment, dict):
        return
    if environment.get("mcp_servers"):
        ctx.add(
            "mcp-servers",
            "warning",
            ctx.root / "task.toml",
            "[environment] mcp_servers: our solver agent does not connect to a task's MCP "
            "servers, so calibration measures it without them (the oracle and the tests do not "
            "need them); a Harbor agent that supports MCP would use them",
        )
    if environment.get("skills_dir"):
        ctx.add(
            "skills-dir",
            "warning",
            ctx.root / "task.toml",
            "[environment] skills_dir: our solver agent has no skills folder and does not read it",
        )


def check_network(ctx: LintContext) -> None:
    for use in network_need(ctx.root).uses:
        ctx.add(
            "needs-network",
            "warning",
            ctx.root / use.file,
            f"{use.what} (`{use.command}`): the {use.phase} needs the internet; the gate gives "
            "a task none unless task.toml declares it (allow_internet = true) and the user "
            "allows it (--allow-internet); otherwise vendor what it fetches into the task",
            use.line,
        )


def check_honoured(ctx: LintContext, backend: str) -> None:
    """`cannot-honour` errors for what `backend` cannot give this task."""
    environment = _raw_config(ctx).get("environment")
    environment = environment if isinstance(environment, dict) else {}
    ours = backend in OUR_BACKENDS
    gpus = environment.get("gpus")
    # Past TaskLimits.max_gpus (0 by default) the limits already reject it; this is for a gate
    # whose limits allow GPUs on a backend that has none.
    limited = any(f.rule == "task-limits" and "gpus" in f.message for f in ctx.findings)
    if ours and isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0 and not limited:
        ctx.add(
            "cannot-honour",
            "error",
            ctx.root / "task.toml",
            f"[environment] gpus = {gpus}: the {backend} sandboxes pass no GPU to a task; run "
            "the gate on a Harbor backend with GPUs (--backend harbor:<type>, e.g. modal) or "
            "set gpus = 0 if the task runs on CPUs",
        )
    if ours and environment.get("tpu"):
        ctx.add(
            "cannot-honour",
            "error",
            ctx.root / "task.toml",
            f"[environment] tpu: the {backend} sandboxes have no TPU; run the gate on a Harbor "
            "backend that provides one (--backend harbor:<type>)",
        )
    compose = [name for name in _COMPOSE_FILES if (ctx.root / "environment" / name).is_file()]
    if ours and compose:
        ctx.add(
            "cannot-honour",
            "error",
            ctx.root / "environment" / compose[0],
            f"a compose environment (services around a `main` one): the {backend} backend runs "
            "one container per task from environment/Dockerfile; run the gate with "
            "--backend harbor-docker (Harbor's docker compose backend) to honour it",
        )


def check_compat(ctx: LintContext, task: TaskView, backend: str | None) -> None:
    check_shebangs(ctx, task)
    check_descriptive_fields(ctx)
    check_agent_fields(ctx)
    check_network(ctx)
    if backend is not None:
        check_honoured(ctx, backend)
