"""The proposer's held-out evaluation as the reports show it: how often the served proposer,
given a brief it never trained on, writes a task that passes lint and one whose oracle solves it.

The flywheel (graphs/flywheel/proposer_heldout.py) serves the proposer each held-out brief k times before
round 1 and after every round that changed the policy, and keeps one `ProposerHeldoutSample` per
attempt. Each rate comes with its 95% Wilson interval over the valid samples (tools/stats.py); a
failed model call or a crashed gate is an infrastructure failure, counted apart, never a failure.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..gate.config import STAGES
from ..stats import Rate, rate


class ProposerHeldoutSample(BaseModel):
    """One proposer attempt on one held-out brief."""

    brief: int = Field(description="The held-out brief's index")
    sample: int
    attempt_id: str
    examples: list[str] = Field(description="The brief's example tasks (held-out folder names)")
    submitted: bool = Field(description="Its task reached the gate (by `submit` or the budget)")
    autosubmitted: bool = False
    stage: str | None = Field(
        description="The gate stage that rejected it; None: it passed every stage the proposer's "
        "gate runs; 'not_submitted' or 'error' when no verdict"
    )
    gate_reward: float | None = None
    files_written: int | None = Field(
        default=None,
        description="Of the task's five files, those it wrote (tools/tasks/task_files.py)",
    )
    infrastructure_error: bool = False
    seconds: float = 0.0

    @property
    def passed_lint(self) -> bool:
        return self.submitted and _past(self.stage, "lint")

    @property
    def oracle_solved(self) -> bool:
        return self.submitted and _past(self.stage, "oracle")


def _past(stage: str | None, of: str) -> bool:
    """A verdict rejected at `stage` (None: none) passed stage `of`."""
    if stage is None:
        return True
    return stage in STAGES and STAGES.index(stage) > STAGES.index(of)


class ProposerHeldoutEval(BaseModel):
    """One evaluation point: the served proposer on the held-out briefs, k samples each."""

    when: str = Field(description="'before round 1' or 'after round N'")
    split: str = Field(description="The folder the held-out briefs' example tasks come from")
    checkpoint: str = Field(description="The policy served to the proposer ('base' before any)")
    briefs: int
    samples_per_brief: int
    reused_from: str | None = Field(
        default=None,
        description="The earlier point of the same checkpoint these samples are (the policy did "
        "not change, so it was not served again)",
    )
    rows: list[ProposerHeldoutSample] = Field(default_factory=list)

    @property
    def valid(self) -> list[ProposerHeldoutSample]:
        return [r for r in self.rows if not r.infrastructure_error]

    @property
    def infrastructure_failures(self) -> int:
        return len(self.rows) - len(self.valid)

    @property
    def submitted(self) -> Rate:
        return rate([float(r.submitted) for r in self.valid])

    @property
    def passes_lint(self) -> Rate:
        return rate([float(r.passed_lint) for r in self.valid])

    @property
    def oracle_solves(self) -> Rate:
        return rate([float(r.oracle_solved) for r in self.valid])

    @property
    def files_written(self) -> float | None:
        """Mean task files written per valid attempt (of 5); None when not recorded."""
        counts = [r.files_written for r in self.valid if r.files_written is not None]
        return sum(counts) / len(counts) if counts else None

    def shown(self) -> str:
        """`passes lint 0.12 [0.04, 0.31] (3/24); oracle solves ...; submitted ...`."""
        parts = [
            f"{name} {r.mean:.2f} [{r.low:.2f}, {r.high:.2f}] ({round(r.mean * r.n)}/{r.n})"
            for name, r in (
                ("passes lint", self.passes_lint),
                ("oracle solves", self.oracle_solves),
                ("submitted", self.submitted),
            )
        ]
        if self.files_written is not None:
            parts.append(f"task files written {self.files_written:.2f} of 5 per attempt")
        if self.infrastructure_failures:
            parts.append(f"{self.infrastructure_failures} infrastructure failure(s)")
        if self.reused_from:
            parts.append(f"the same checkpoint as {self.reused_from}: not served again")
        return "; ".join(parts)
