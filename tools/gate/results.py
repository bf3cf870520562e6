"""What the gate reports: one `StageResult` per stage run, one `Verdict` per candidate."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..tasks.host_env import redact_host_values
from ..trials.verifier import VerifierMode, verifier_mode
from .config import STAGES, StageName
from .kinds import Kind, Missing, sentence

#: Proposer rewards (ARCHITECTURE.md): admitted, failed calibration only, failed validation.
REWARD_ADMITTED = 1.0
REWARD_CALIBRATION_FAILED = -0.25
REWARD_VALIDATION_FAILED = -1.0

EXCERPT_CHARS = 1500
#: `StageResult.details["status"]` of a stage that had nothing configured to check against.
NOT_CONFIGURED_STATUS = "not_configured"
#: `StageResult.details["status"]` of a lint stage that did not judge a GPU task this gate has no
#: GPU for (tools/gate/gpu.py); `details["gpus"]` holds how many it asks for.
NEEDS_GPU_STATUS = "needs_gpu"


def excerpt(text: str | None, limit: int = EXCERPT_CHARS) -> str:
    """The end of a long output (where failures are reported), marked when cut."""
    text = (text or "").strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def scrub_paths(text: str, task: Path) -> str:
    """`text` without this machine's paths: the task folder becomes its name, scratch folders
    (trial folders, sandboxes) become `<scratch>`; a proposer reads this, and it is stored."""
    if not text:
        return text
    for folder in {str(task), str(task.resolve())}:
        text = text.replace(folder, task.name)
    scratch = re.escape(str(Path(tempfile.gettempdir()).resolve()))
    return re.sub(rf"{scratch}(?:/[^\s'\"/:]+)*", "<scratch>", text)


class StageResult(BaseModel):
    stage: StageName
    passed: bool = Field(description="True when the stage admits the task (or was skipped).")
    skipped: bool = Field(
        default=False, description="Not run: by request or nothing to check against."
    )
    reason: str = Field(description="One specific sentence: what was found and what to change.")
    details: dict[str, Any] = Field(default_factory=dict, description="Measured values.")
    excerpt: str = Field(
        default="", description="Tail of the failing output (verifier, build, lint)."
    )
    duration_sec: float = 0.0
    infrastructure_error: bool = Field(
        default=False,
        description="The stage could not judge the task (sandbox, engine, harness "
        "failure): not the task's fault, not counted against the proposer.",
    )
    missing: list[Missing] = Field(
        default_factory=list,
        description="What this machine lacks that made the stage fail (a base image, the "
        "internet, GPUs, compose): the task cannot run here, which says nothing of the task.",
    )

    @classmethod
    def skip(cls, stage: StageName, reason: str) -> StageResult:
        return cls(stage=stage, passed=True, skipped=True, reason=reason)

    @classmethod
    def infrastructure(cls, stage: StageName, reason: str, **details: Any) -> StageResult:
        return cls(
            stage=stage, passed=False, reason=reason, details=details, infrastructure_error=True
        )


class Verdict(BaseModel):
    task: str = Field(description="The candidate task folder.")
    task_name: str
    admitted: bool
    stage: StageName | None = Field(description="The rejecting stage; None when admitted.")
    reason: str = Field(description="Why: specific enough for the proposer to act on.")
    excerpt: str = Field(default="", description="Failing output of the rejecting stage.")
    proposer_reward: float | None = Field(
        description="+1 admitted, -0.25 failed calibration, -1 failed validation; None when an "
        "infrastructure failure kept the gate from judging the task."
    )
    infrastructure_error: bool = False
    kind: Kind | None = Field(
        default=None,
        description="Whose 'no' a rejection is: task_wrong (the task is broken; -1 for a "
        "proposer), cannot_run_here (this machine lacks what it needs, see `missing`), "
        "infrastructure (the gate's machinery failed). None when admitted.",
    )
    missing: list[Missing] = Field(
        default_factory=list,
        description="For cannot_run_here: exactly what is missing and how to provide it.",
    )
    needs_gpus: int = Field(
        default=0,
        description="GPUs the task asks for that this gate has none of: the task was not run "
        "(not judged, no proposer reward), never failed for the missing device.",
    )
    stages: list[StageResult] = Field(
        default_factory=list, description="Every stage run, in order."
    )
    skipped: list[StageName] = Field(default_factory=list)
    not_configured: list[StageName] = Field(
        default_factory=list,
        description="Stages that did not run because nothing was configured to check against "
        "(decontam without a held-out benchmark): the task was admitted WITHOUT these checks.",
    )
    content_hash: str | None = Field(
        default=None, description="sha256 over every file of the task folder the stages checked."
    )
    duration_sec: float = 0.0
    backend: str = ""
    network: dict[str, Any] | None = Field(
        default=None,
        description="The task's network need (what it fetches, by phase), whether it declares "
        "the internet, whether the user's policy allows it, and whether it was granted.",
    )
    verifier_mode: VerifierMode | None = Field(
        default=None,
        description="Where the task's tests run: 'separate' (a fresh container with the agent's "
        "work copied in) or 'shared' (the agent's container, its processes killed first: the "
        "task opted in to check system state, and relies on the anti-cheat probes).",
    )

    @property
    def timings(self) -> dict[str, float]:
        return {r.stage: round(r.duration_sec, 3) for r in self.stages if not r.skipped}

    def summary(self) -> str:
        if self.admitted:
            return f"{self.task_name}: admitted ({self.reason})"
        if self.needs_gpus:
            return f"{self.task_name}: not judged: {self.reason}"
        if self.kind == "cannot_run_here":
            return f"{self.task_name}: not judged ({self.stage}): {self.reason}"
        return f"{self.task_name}: rejected at {self.stage}: {self.reason}"


def make_verdict(task: Path | str, results: Sequence[StageResult], *, backend: str = "") -> Verdict:
    """The verdict of the stages run so far: the first failing stage decides."""
    task = Path(task)
    # No host value (an API key a template or a test printed) goes back in a verdict.
    ordered = [
        r.model_copy(
            update={
                "reason": redact_host_values(r.reason),
                "excerpt": redact_host_values(r.excerpt),
            }
        )
        for r in sorted(results, key=lambda r: STAGES.index(r.stage))
    ]
    common: dict[str, Any] = {
        "task": str(task),
        "task_name": task.name,
        "stages": ordered,
        "skipped": [r.stage for r in ordered if r.skipped],
        "not_configured": [
            r.stage for r in ordered if r.details.get("status") == NOT_CONFIGURED_STATUS
        ],
        "duration_sec": round(sum(r.duration_sec for r in ordered), 3),
        "backend": backend,
        "verifier_mode": verifier_mode(task),
        "network": next((r.details["network"] for r in ordered if "network" in r.details), None),
    }
    failed = next((r for r in ordered if not r.passed), None)
    if failed is not None:
        failed = failed.model_copy(
            update={
                "reason": scrub_paths(failed.reason, task),
                "excerpt": scrub_paths(failed.excerpt, task),
            }
        )
    if failed is None:
        ran = [r.stage for r in ordered if not r.skipped]
        unchecked = common["not_configured"]
        skipped = [s for s in common["skipped"] if s not in unchecked]
        note = f"; skipped: {', '.join(skipped)}" if skipped else ""
        if unchecked:
            note += f"; NOT RUN (not configured): {', '.join(unchecked)}"
        missing: list[StageName] = [s for s in STAGES if s not in {r.stage for r in ordered}]
        if missing:  # a partial run (e.g. a caller stopped early) admits nothing
            return Verdict(
                admitted=False,
                stage=missing[0],
                proposer_reward=None,
                infrastructure_error=True,
                kind="infrastructure",
                reason=f"stage {missing[0]} never ran; the gate run was incomplete",
                **common,
            )
        return Verdict(
            admitted=True,
            stage=None,
            proposer_reward=REWARD_ADMITTED,
            reason=f"passed {len(ran)} stages ({', '.join(ran)}){note}",
            **common,
        )
    if failed.details.get("status") == NEEDS_GPU_STATUS:
        gpus = int(failed.details.get("gpus") or 1)
        return Verdict(
            admitted=False,
            stage=failed.stage,
            proposer_reward=None,
            infrastructure_error=True,
            kind="cannot_run_here",
            missing=[
                Missing(
                    need="gpus",
                    what=f"{gpus} GPU{'s' if gpus > 1 else ''}",
                    provide="run the gate where GPUs are (a GPU machine with the podman backend "
                    "and AUTOENVSCALING_TASK_MAX_GPUS, or --backend harbor:<type>)",
                )
            ],
            needs_gpus=gpus,
            reason=failed.reason,
            **common,
        )
    if failed.missing:  # not the task's fault, nor the machinery's: this machine lacks it
        return Verdict(
            admitted=False,
            stage=failed.stage,
            proposer_reward=None,
            kind="cannot_run_here",
            missing=failed.missing,
            reason=sentence(failed.missing),
            excerpt=failed.excerpt,
            **common,
        )
    if failed.infrastructure_error:
        return Verdict(
            admitted=False,
            stage=failed.stage,
            proposer_reward=None,
            infrastructure_error=True,
            kind="infrastructure",
            reason=f"infrastructure failure in {failed.stage} (not the task's fault; rerun "
            f"when the machine is fixed): {failed.reason}",
            excerpt=failed.excerpt,
            **common,
        )
    # -0.25 only for a task that runs but sits outside the band; a broken task (a task fault,
    # tools/trials/faults.py) is a failed validation wherever the gate found it.
    out_of_band = failed.stage == "calibrate" and not failed.details.get("task_fault")
    reward = REWARD_CALIBRATION_FAILED if out_of_band else REWARD_VALIDATION_FAILED
    return Verdict(
        admitted=False,
        stage=failed.stage,
        proposer_reward=reward,
        kind="task_wrong",
        reason=failed.reason,
        excerpt=failed.excerpt,
        **common,
    )


def infrastructure_verdict(task: Path | str, error: BaseException, *, backend: str = "") -> Verdict:
    """For a candidate whose gate run itself crashed: reported, never blamed on the task."""
    task = Path(task)
    return Verdict(
        task=str(task),
        task_name=task.name,
        admitted=False,
        stage=None,
        proposer_reward=None,
        infrastructure_error=True,
        kind="infrastructure",
        backend=backend,
        reason=scrub_paths(
            f"infrastructure failure: the gate crashed ({type(error).__name__}: {error})", task
        ),
    )
