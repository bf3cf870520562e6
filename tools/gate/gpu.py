"""GPU tasks at a gate without a GPU: not judged, with the need and the remedy named.

A task asks for GPUs with Harbor's `[environment] gpus` (or `[verifier.environment] gpus`). A gate
has none to give when its limits allow none (`TaskLimits.max_gpus`, 0 unless
`AUTOENVSCALING_TASK_MAX_GPUS` says more) or its backend passes none to a sandbox (our podman and
docker engines). Running the task anyway would fail it for the missing device and call that the
task's fault, so the lint stage returns a result that did not judge the task: it needs a GPU,
here is how to give the gate one. Other lint errors still reject the task: they are its own fault
whatever the machine; so does a request for more GPUs than one machine holds. The verdict carries
`needs_gpus` and no proposer reward (results.py).
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from ..tasks.limits import TaskLimits
from .kinds import BRIEFED_NEEDS
from .lint.harbor_compat import OUR_BACKENDS
from .lint.model import LintFinding, LintReport
from .results import (
    NEEDS_GPU_STATUS,
    REWARD_VALIDATION_FAILED,
    StageResult,
    Verdict,
    excerpt,
)

#: The most GPUs one machine holds (an 8-GPU node). A task that asks for more asks for what no
#: backend gives one task: its limit error stands, a rejection like any other out-of-range field.
MAX_GPUS_PER_TASK = 8

#: How to give the gate a GPU (README "Kernels and GPUs"); every needs-GPU verdict ends with it.
GIVE_THE_GATE_A_GPU = (
    "Give the gate a GPU: AUTOENVSCALING_TASK_MAX_GPUS={n} autoenvscaling validate TASK "
    "--backend harbor-docker on a machine with an NVIDIA GPU, docker and NVIDIA's container "
    "toolkit, or --backend harbor:<type> whose sandboxes have GPUs (e.g. harbor:modal)"
)


def _count(table: Any) -> int:
    value = table.get("gpus") if isinstance(table, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def gpus_asked(task: Path) -> int:
    """The most GPUs the task's environment or verifier asks for (0 for none, or no task.toml)."""
    try:
        raw = tomllib.loads((task / "task.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, RecursionError):
        return 0
    verifier = raw.get("verifier")
    nested = verifier.get("environment") if isinstance(verifier, dict) else None
    return max(_count(raw.get("environment")), _count(nested))


def missing_gpus(asked: int, backend: str, limits: TaskLimits) -> list[str]:
    """Why this gate cannot give `asked` GPUs; empty when it can."""
    why = []
    if asked > limits.max_gpus:
        why.append(
            f"its limits allow {limits.max_gpus} (TaskLimits.max_gpus, "
            "AUTOENVSCALING_TASK_MAX_GPUS)"
        )
    if backend in OUR_BACKENDS:
        why.append(f"its {backend} backend passes no GPU to a sandbox")
    return why


def _about_gpus(finding: LintFinding) -> bool:
    """A lint error that only says the GPUs cannot be had (a limit, or a backend without)."""
    return finding.rule in ("task-limits", "cannot-honour") and "gpus" in finding.message


def gpu_lint_result(
    task: Path, report: LintReport, backend: str, limits: TaskLimits | None = None
) -> StageResult | None:
    """The lint stage's result for a GPU task this gate cannot serve: not judged when the GPU is
    all that is missing, else a rejection led by the task's own errors. None when the task asks
    for no GPU or the gate can give it one (the ordinary lint result stands)."""
    asked = gpus_asked(task)
    if not 0 < asked <= MAX_GPUS_PER_TASK:
        return None
    why = missing_gpus(asked, backend, limits or TaskLimits())
    if not why:
        return None
    plural = "s" if asked > 1 else ""
    need = f"task.toml asks for {asked} GPU{plural} (gpus = {asked}) and this gate has none to give"
    details = {"findings": [f.model_dump() for f in report.findings], "gpus": asked}
    own = [f for f in report.errors if not _about_gpus(f)]
    if own:
        more = f" (+{len(own) - 1} more)" if len(own) > 1 else ""
        return StageResult(
            stage="lint",
            passed=False,
            reason=f"{own[0]}{more}; besides, {need}",
            details=details,
            excerpt=excerpt(report.summary()),
        )
    return StageResult(
        stage="lint",
        passed=False,
        infrastructure_error=True,
        reason=f"needs a GPU: {need} ({'; '.join(why)}), so the task was not run: without the "
        "GPU it would fail for the missing device, which says nothing about the task. "
        + GIVE_THE_GATE_A_GPU.format(n=asked),
        details={**details, "status": NEEDS_GPU_STATUS},
    )


def scored_for_proposer(verdict: Verdict) -> Verdict:
    """The verdict as a proposer in this run is scored by it. A task that needs a GPU this gate
    has none of is not judged (the task keeps that verdict), but this run can never admit it:
    the proposer scores it as a rejection. Not judged would also spare it the -1, so a policy
    that adds `gpus = 1` to any task it cannot make pass would escape every rejection."""
    if not verdict.needs_gpus:
        return _briefed(verdict)
    return verdict.model_copy(
        update={
            "proposer_reward": REWARD_VALIDATION_FAILED,
            "infrastructure_error": False,
            "kind": "task_wrong",
            "reason": f"{verdict.reason}. For this run it counts as a rejection: a task that "
            "asks for a GPU cannot be admitted where the gate has none; drop `gpus` unless "
            "the task cannot work without one",
        }
    )


def _briefed(verdict: Verdict) -> Verdict:
    """A proposer's brief names the bases that exist and says there is no internet: a task that
    needs another base or a network is the proposer's error here (-1), not a machine's lack.
    An imported task keeps `cannot_run_here` (its author was told nothing of this machine)."""
    if verdict.kind != "cannot_run_here" or not verdict.missing:
        return verdict
    if not all(m.need in BRIEFED_NEEDS for m in verdict.missing):
        return verdict
    return verdict.model_copy(
        update={
            "proposer_reward": REWARD_VALIDATION_FAILED,
            "kind": "task_wrong",
            "reason": f"{verdict.reason}. Your brief lists the base images that exist and says "
            "tasks get no internet: use one of those bases and vendor or drop what it fetches",
        }
    )
