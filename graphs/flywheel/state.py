"""The flywheel's state and the items its fan-out sends: models, not dicts.

Every value the flywheel's state or a pending `Send` holds is one of these models (or a model
they name), so the run's SQLite checkpointer restores them as models (graphs/flywheel/builder.py:
`checkpoint_serde` registers every model reachable from these schemas) and every reader names
fields a type checker follows. What is written to disk keeps its JSON shape: the reports take
`model_dump(mode="json")` or `TrainingSummary.report()`.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Required, TypedDict

from pydantic import BaseModel, Field

from ...tools.agents.brief import ProposerBrief
from ...tools.report.metrics import CandidateRecord, RoundMetrics
from ..models import Policy
from ..proposer.settings import ProposalResult


class TrainingSummary(BaseModel):
    """What the training node did this round: the solver's update, the proposer's, the modes.

    `solver` and `proposer` are the trainers' summaries as the round report shows them (steps,
    groups, the backend's own metrics, a checkpoint or the reason there is none); their keys
    are open because a backend's metrics are."""

    solver: dict[str, Any] = Field(default_factory=dict)
    proposer: dict[str, Any] = Field(default_factory=dict)
    run_modes: str = ""
    served: dict[str, str] = Field(
        default_factory=dict,
        description="What each role is served after the round's training (a checkpoint id, "
        "`base`, or the model a role is configured apart with), read from the policy the "
        "training node ends with (graphs/flywheel/measure.py: served_checkpoints)",
    )

    def report(self) -> dict[str, Any]:
        """The flat summary the round report and metrics.json hold (their shape is unchanged):
        the solver's keys, then `proposer` and `run_modes`."""
        return {**self.solver, "proposer": self.proposer, "run_modes": self.run_modes}

    def headline(self) -> str:
        """One line for the progress log: the checkpoint each role is served now, then why an
        update's checkpoint is not among them (none published, or its swap failed). A summary
        that names nothing served (one checkpointed before `served` existed) says the solver's
        checkpoint or why there is none."""
        if not self.served:
            s = self.solver
            return s.get("checkpoint") or s.get("reason") or s.get("error") or ""
        parts = ["serving " + ", ".join(f"{role}: {name}" for role, name in self.served.items())]
        for role, summary in (("proposer", self.proposer), ("solver", self.solver)):
            if summary.get("checkpoint") in self.served.values():
                continue
            why = summary.get("reason") or summary.get("error")
            if why:
                parts.append(f"{role} update: {why}")
        return "; ".join(parts)


class FlywheelInput(TypedDict, total=False):
    """What Studio's input form shows, and the graph reads: the rounds the run goes to (the
    context's `rounds` when not given)."""

    rounds: int


class FlywheelState(TypedDict, total=False):
    rounds: int  # the input's: the run ends after this round (graphs/flywheel/nodes.py: _rounds)
    # Required: `setup` and `inspect` write them before any node that reads them runs.
    run_id: Required[str]
    round: Required[int]
    policy: Required[Policy]  # the model both roles use; a swap writes a new one
    brief: Required[ProposerBrief]
    candidates: Annotated[list[CandidateRecord], operator.add]
    round_started: float
    stage_seconds: dict[str, float]
    training: TrainingSummary | None  # None between rounds
    metrics: Annotated[list[RoundMetrics], operator.add]


class SlotTask(BaseModel):
    """One proposer slot's input, sent by `propose` to `propose_one` (Send state is per branch)."""

    slot: int
    round: int
    run_id: str
    policy: Policy
    brief: ProposerBrief


class AdmitItem(SlotTask):
    """One final candidate, sent by `propose_one` to `admit_one`."""

    candidate: ProposalResult


__all__ = [
    "AdmitItem",
    "FlywheelInput",
    "FlywheelState",
    "SlotTask",
    "TrainingSummary",
]
