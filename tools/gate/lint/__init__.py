"""The gate's static `lint` stage: everything that can be judged without building anything.

Runs the task-format checks of `tasks/format.py`, a chosen subset of Harbor's own `harbor lint`
rules (harbor_rules.py), and the checks Harbor lacks: the Dockerfile subset our sandboxes build,
tests/ and solution/ kept out of the image (dockerfile_rules.py), a reward file written by test.sh,
every path the tests check named in instruction.md, pinned requirements files (verifier_rules.py),
patterns that make reward hacks easy (hacks.py), and what real Harbor tasks write that Harbor runs
or that this gate cannot honour (harbor_compat.py). Each finding names the file and what to change.
"""

from __future__ import annotations

from pathlib import Path

from ...tasks.format import check_task
from ...tasks.limits import TaskLimits, inventory
from .dockerfile_rules import check_dockerfile
from .env_rules import check_host_env
from .hacks import hack_findings
from .harbor_compat import check_compat
from .harbor_rules import check_harbor_rules
from .model import LintContext, LintFinding, LintReport, TaskView
from .verifier_rules import (
    check_outputs_named,
    check_requirements,
    check_reward,
    verifier_sources,
)

__all__ = ["LintFinding", "LintReport", "lint_task"]


def _scrub(text: str, root: Path) -> str:
    """Messages name files relative to the task, never by their place on this machine."""
    for prefix in {str(root), str(root.resolve())}:
        text = text.replace(prefix + "/", "").replace(prefix, ".")
    return text


def lint_task(
    task_dir: Path | str,
    limits: TaskLimits | None = None,
    *,
    backend: str | None = None,
    needs_solution: bool = False,
) -> LintReport:
    """Run every static check on one task folder. Never raises for a bad task.

    `backend`: the gate's backend; given, fields it cannot honour (GPUs, compose) are errors.
    `needs_solution`: the gate's oracle will run solution/solve.sh, so a task without one is an
    error here (Harbor's format makes it optional; a trial without it fails as no task fault).

    Bounded: the folder is first checked against `TaskLimits` with one `lstat` walk (file count,
    sizes, special files, links, names); a task that breaks a limit gets only those findings.
    """
    root = Path(task_dir)
    limits = limits or TaskLimits()
    ctx = LintContext(root.resolve() if root.exists() else root)
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
        check_harbor_rules(ctx, quiet=bool(format_errors))
        task = TaskView.of(ctx.root)
        check_dockerfile(ctx, task)
        check_host_env(ctx)
        sources = verifier_sources(task)
        check_reward(ctx, task, sources)
        check_outputs_named(ctx, task, sources)
        check_requirements(ctx, task)
        check_compat(ctx, task, backend)
        if needs_solution and not (ctx.root / "solution" / "solve.sh").is_file():
            ctx.add(
                "no-solution",
                "error",
                ctx.root / "solution" / "solve.sh",
                "missing: the gate's oracle stage runs it and must score 1.0; write the reference "
                "solution as solution/solve.sh (a task without one cannot be admitted)",
            )
        ctx.findings += [LintFinding(**f) for f in hack_findings(ctx.root)]
    findings = sorted(
        ctx.findings, key=lambda f: (f.severity != "error", f.file, f.line or 0, f.rule)
    )
    return LintReport(
        task=str(task_dir),
        ok=not any(f.severity == "error" for f in findings),
        findings=findings,
    )
