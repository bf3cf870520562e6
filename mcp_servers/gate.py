"""MCP gate server: the proposer's `check` (the admission gate on its own task folder) and `submit`.

A thin face over `tools.gate.validate_task`, bound to one candidate folder, so a proposer can only
ever check and submit its own task. `check` runs every stage but calibrate (the proposer cannot
calibrate against the solver while it builds); `submit` ends the proposer's turn — its caller
then runs the full gate.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field

from ..tools.gate import STAGES, GateConfig, StageName, Verdict, validate_task
from ..tools.gate.gpu import scored_for_proposer
from ..tools.gate.kinds import Kind
from ..tools.tasks.format import check_task

# The stages a proposer may never run against itself.
NEVER_CHECKED: tuple[StageName, ...] = ("calibrate",)


class StageLine(BaseModel):
    stage: StageName
    passed: bool
    skipped: bool
    reason: str
    seconds: float


class CheckReport(BaseModel):
    passed: bool = Field(description="Every stage that ran passed.")
    stage: StageName | None = Field(description="The first failing stage, if any.")
    reason: str = Field(description="What was found and what to change.")
    excerpt: str = Field(
        default="", description="Tail of the failing output (build, verifier, lint)."
    )
    infrastructure_error: bool = Field(
        default=False,
        description="The gate itself failed (not your task's fault): try check again.",
    )
    kind: Kind | None = Field(
        default=None,
        description="Whose 'no': task_wrong (fix the task), cannot_run_here (this machine lacks "
        "what it needs, see `missing`), infrastructure (the gate failed). None when passed.",
    )
    missing: list[str] = Field(
        default_factory=list, description="For cannot_run_here: what is missing, how to provide it."
    )
    stages: list[StageLine]
    seconds: float


class SubmitReceipt(BaseModel):
    submitted: bool
    files: list[str] = Field(description="The files submitted, relative to the task folder.")
    format_problems: list[str] = Field(
        default_factory=list, description="Format errors the gate's lint stage will reject."
    )
    note: str


def report_of(verdict: Verdict) -> CheckReport:
    return CheckReport(
        passed=verdict.admitted,
        stage=verdict.stage,
        reason=verdict.reason,
        excerpt=verdict.excerpt,
        infrastructure_error=verdict.infrastructure_error,
        kind=verdict.kind,
        missing=[str(m) for m in verdict.missing],
        stages=[
            StageLine(
                stage=r.stage,
                passed=r.passed,
                skipped=r.skipped,
                reason=r.reason,
                seconds=r.duration_sec,
            )
            for r in verdict.stages
        ],
        seconds=verdict.duration_sec,
    )


def build_gate_server(
    task_dir: str | os.PathLike[str],
    config: GateConfig | None = None,
    *,
    on_submit: Callable[[str], None] | None = None,
    name: str = "gate",
) -> FastMCP:
    """`check` and `submit` for the task folder `task_dir` (and nothing else)."""
    root = Path(task_dir).resolve()
    gate = config or GateConfig()
    server = FastMCP(
        name,
        log_level="WARNING",  # INFO would log every request
        instructions=(
            "The admission gate for your task folder. check runs its stages (all but calibrate) "
            "in clean sandboxes and reports the first failure; submit hands the task in."
        ),
    )

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False))
    async def check(until: StageName | None = None) -> CheckReport:
        """Run the gate's stages on your task folder, in order, stopping at the first failure.

        Stages: lint, build, oracle, nop, repeat, anti_cheat, decontam, dedup (calibrate only runs
        after submit). `until` stops after that stage (e.g. "lint" for a quick static check).
        Takes from seconds (lint) to a few minutes (builds and trials).
        """
        skip = list(NEVER_CHECKED)
        if until is not None:
            skip += [s for s in STAGES[STAGES.index(until) + 1 :]]
        verdict = scored_for_proposer(await validate_task(root, gate, skip=skip))
        return _inside(report_of(verdict), root)

    @server.tool(annotations=ToolAnnotations(destructiveHint=False, openWorldHint=False))
    async def submit(summary: str = "") -> SubmitReceipt:
        """Submit your task folder to the full admission gate. This ends your turn.

        `summary`: one or two sentences on what the task trains and why it suits the solver.
        """
        if on_submit is not None:
            on_submit(summary)
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        return SubmitReceipt(
            submitted=True,
            files=files,
            format_problems=[_relative(str(e), root) for e in check_task(root)],
            note="submitted: the full gate (with calibration against the solver) now decides",
        )

    return server


def _relative(text: str, root: Path) -> str:
    """The folder's host path never reaches the model: its files are named relative to it."""
    return text.replace(f"{root}/", "").replace(str(root), ".")


def _inside(report: CheckReport, root: Path) -> CheckReport:
    lines = [
        line.model_copy(update={"reason": _relative(line.reason, root)}) if line.reason else line
        for line in report.stages
    ]
    return report.model_copy(
        update={
            "reason": _relative(report.reason, root) if report.reason else report.reason,
            "excerpt": _relative(report.excerpt, root) if report.excerpt else report.excerpt,
            "stages": lines,
        }
    )
