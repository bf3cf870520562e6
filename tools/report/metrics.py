"""What the project measures per round and per run, computed from the run folder and the store.

Numbers come from the same records the report cites: candidate verdicts (candidates/rNN/),
the rollout store, the pool index and the training result, so a report can be checked against
its sources.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..rollouts.models import Attempt
from ..rollouts.store import RolloutStore
from ..tasks.domains import DEFAULT_DOMAIN, Domain, folder_domain
from ..tasks.pool import Pool
from .activity import (
    GrpoGroups,
    RoleActivity,
    activity_warnings,
    grpo_groups,
    role_activity,
)
from .domains import DomainCounts, domain_counts
from .heldout import HeldoutEval, heldout_eval
from .proposer_heldout import ProposerHeldoutEval
from .truncation import CompletionTruncation


class CandidateRecord(BaseModel):
    """One proposed environment and what the gate said about it."""

    round: int
    slot: int
    revision: int
    path: str
    task_id: str
    attempt_id: str | None = None
    arm: str = "terminal"
    domain: Domain | None = Field(
        default=None,
        description="The candidate's domain (tools/tasks/domains.py): its task.toml's tags, else "
        "the domain its proposer was aimed at; None in records written before domains.",
    )
    admitted: bool = False
    stage: str | None = None
    reason: str = ""
    proposer_reward: float | None = Field(
        default=-1.0,
        description="None when infrastructure kept the gate from judging the candidate.",
    )
    infrastructure_error: bool = False
    content_hash: str | None = Field(default=None, description="The checked (and admitted) bytes.")
    snapshot: str | None = Field(default=None, description="The frozen copy the pool received.")
    not_configured: list[str] = Field(
        default_factory=list, description="Gate stages that did not run (nothing configured)."
    )
    prompt_tokens: int = 0
    completion_tokens: int = 0
    stage_seconds: dict[str, float] = Field(default_factory=dict)

    def domain_or_folder(self) -> Domain:
        """The recorded domain; for an older record, the one its folder's task.toml names."""
        return self.domain or folder_domain(self.path) or DEFAULT_DOMAIN


class PriceTable(BaseModel):
    """USD per million tokens, by model string; the embedded model costs nothing."""

    prices: dict[str, tuple[float, float]] = Field(default_factory=dict)

    def cost(self, model: str, prompt: int, completion: int) -> float:
        p_in, p_out = self.prices.get(model, (0.0, 0.0))
        return (prompt * p_in + completion * p_out) / 1e6


class RoundMetrics(BaseModel):
    round: int
    candidates: int = 0
    revisions: int = Field(default=0, description="Revisions the proposers made after rejections")
    scored: int = 0
    infrastructure_failures: int = Field(
        default=0, description="Candidates the gate could not judge"
    )
    solver_infrastructure_failures: int = Field(
        default=0,
        description="Solver attempts lost to infrastructure (no reward; excluded from means)",
    )
    model_retries: int = Field(
        default=0, description="Model calls retried after a transient failure"
    )
    admitted: int = 0
    valid_environment_rate: float | None = None
    reject_reasons: dict[str, int] = Field(default_factory=dict)
    proposer_tokens: int = 0
    proposer_cost: float = 0.0
    tokens_per_valid_environment: float | None = None
    cost_per_valid_environment: float | None = None
    solver_attempts: int = 0
    solver_mean_reward_pool: float | None = None
    solver_mean_reward_heldout: float | None = None
    pool_active: int = 0
    pool_retired: int = 0
    pool_undecided: dict[str, int] = Field(
        default_factory=dict,
        description="Pool tasks the refresh measured with too few valid samples to retire on "
        "(task id: valid samples); they stay",
    )
    difficulty_histogram: dict[str, int] = Field(default_factory=dict)
    domains: dict[str, DomainCounts] = Field(
        default_factory=dict,
        description="Proposals, admissions and solve rates per domain (every domain listed); "
        "empty in rounds recorded before domains.",
    )
    training: dict[str, Any] = Field(default_factory=dict)
    stage_seconds: dict[str, float] = Field(default_factory=dict)
    policy: str = ""
    served: dict[str, str] = Field(
        default_factory=dict,
        description="What each role is served after the round's training: a checkpoint id, "
        "`base`, or the model a role is configured apart with",
    )
    decontamination: str = Field(
        default="", description="Whether and against what decontam checked."
    )
    heldout_configured: bool = Field(default=False, description="A held-out set was evaluated.")
    heldout: HeldoutEval | None = Field(
        default=None, description="The held-out evaluation after this round's training."
    )
    heldout_before: HeldoutEval | None = Field(
        default=None, description="Round 1 only: the held-out evaluation before round 1."
    )
    proposer_heldout: ProposerHeldoutEval | None = Field(
        default=None,
        description="The proposer's held-out evaluation after this round (graphs/flywheel/proposer_heldout.py)",
    )
    proposer_heldout_before: ProposerHeldoutEval | None = Field(
        default=None, description="Round 1 only: the proposer's held-out evaluation before it."
    )
    splits: str = Field(
        default="",
        description="The run's splits (cold start, pool seed, held-out) and whether they share "
        "a task (tools/tasks/splits.py)",
    )
    brief_evidence: dict[str, Any] = Field(
        default_factory=dict,
        description="The round's brief: failures and pass rates it cites, the rounds they come "
        "from, and whether it cites the previous round's rollouts (tools/agents/brief.py)",
    )
    notes: list[str] = Field(default_factory=list)
    agent_activity: list[RoleActivity] = Field(
        default_factory=list,
        description="Per role (the solver per purpose): tool calls, stop reasons, submissions.",
    )
    grpo_groups: list[GrpoGroups] = Field(
        default_factory=list, description="Each update's GRPO groups; empty when none was planned."
    )
    proposer_truncation: CompletionTruncation | None = Field(
        default=None,
        description="The proposer update's episodes cut to its completion length (None: no "
        "update ran, or one recorded before it was counted).",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="Plain-language lines for what makes the outcome numbers mean little "
        "(a role that never called a tool, no submission, GRPO without reward variance).",
    )


BINS = [
    (0.0, 0.0, "0"),
    (0.0, 0.25, "(0,0.25)"),
    (0.25, 0.75, "[0.25,0.75]"),
    (0.75, 1.0, "(0.75,1)"),
    (1.0, 1.0, "1"),
]


def as_number(value: Any) -> float | None:
    """A metric read from a JSON mapping (`RoundMetrics.training`): a number, else None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def difficulty_bin(mean: float) -> str:
    if mean <= 0.0:
        return "0"
    if mean >= 1.0:
        return "1"
    if mean < 0.25:
        return "(0,0.25)"
    if mean <= 0.75:
        return "[0.25,0.75]"
    return "(0.75,1)"


def _mean(attempts: list[Attempt]) -> float | None:
    rewards = [a.reward for a in attempts if a.reward is not None]
    return statistics.fmean(rewards) if rewards else None


def round_metrics(
    round_: int,
    records: list[CandidateRecord],
    store_path: Path | str,
    pool: Pool,
    run_id: str,
    *,
    prices: PriceTable | None = None,
    proposer_model: str = "",
    training: dict[str, Any] | None = None,
    stage_seconds: dict[str, float] | None = None,
    policy: str = "",
    heldout_split: str = "",
    heldout_samples: int = 0,
) -> RoundMetrics:
    prices = prices or PriceTable()
    # One record per proposer slot: its revisions happened inside the proposer's attempt.
    infra = [r for r in records if r.infrastructure_error]
    scored = [r for r in records if not r.infrastructure_error]
    admitted = [r for r in scored if r.admitted]
    reasons = Counter(r.stage or "unknown" for r in scored if not r.admitted)
    tokens = sum(r.prompt_tokens + r.completion_tokens for r in records)
    cost = sum(prices.cost(proposer_model, r.prompt_tokens, r.completion_tokens) for r in records)
    with RolloutStore(store_path) as store:
        # Round 0 holds the baseline measured before round one's proposers: round one's report.
        rounds = {round_, 0} if round_ == 1 else {round_}
        everything = [
            a for a in store.list_attempts(run_id=run_id, limit=1_000_000) if a.round in rounds
        ]
        steps = store.step_counts(a.id for a in everything)
    # Infrastructure failures (outcome `error`) carry no reward and are counted apart.
    attempts = [
        a
        for a in everything
        if a.role == "solver" and a.outcome != "error" and a.reward is not None
    ]
    lost = [a for a in everything if a.role == "solver" and a.outcome == "error"]
    retries = sum(int(a.metadata.get("model_retries") or 0) for a in everything)
    solver = [a for a in attempts if a.metadata.get("purpose") == "refresh"]
    # Held-out attempts, errors included (counted apart): round 0's were made before round 1.
    heldout_all = [
        a for a in everything if a.role == "solver" and a.metadata.get("purpose") == "heldout"
    ]
    heldout = [a for a in heldout_all if a.round == round_ and a.outcome != "error"]
    after = heldout_eval(
        [a for a in heldout_all if a.round == round_],
        f"after round {round_}",
        heldout_split,
        heldout_samples,
    )
    before = heldout_eval(
        [a for a in heldout_all if a.round == 0 and round_ == 1],
        "before round 1",
        heldout_split,
        heldout_samples,
    )
    activity = role_activity(everything, steps)
    groups = grpo_groups(training or {})
    histogram = Counter(
        difficulty_bin(e.last_mean) for e in pool.entries("active") if e.last_mean is not None
    )
    return RoundMetrics(
        round=round_,
        candidates=len(records),
        revisions=sum(r.revision for r in records),
        scored=len(scored),
        infrastructure_failures=len(infra),
        solver_infrastructure_failures=len(lost),
        model_retries=retries,
        admitted=len(admitted),
        valid_environment_rate=len(admitted) / len(scored) if scored else None,
        reject_reasons=dict(reasons),
        proposer_tokens=tokens,
        proposer_cost=round(cost, 6),
        tokens_per_valid_environment=tokens / len(admitted) if admitted else None,
        cost_per_valid_environment=cost / len(admitted) if admitted else None,
        solver_attempts=len(solver),
        solver_mean_reward_pool=_mean(solver),
        solver_mean_reward_heldout=_mean(heldout),
        heldout=after,
        heldout_before=before,
        pool_active=len(pool.entries("active")),
        pool_retired=len(pool.entries("retired")),
        difficulty_histogram={label: histogram.get(label, 0) for *_, label in BINS},
        domains=domain_counts([(r.domain_or_folder(), r.admitted) for r in records], solver, pool),
        training=training or {},
        stage_seconds=stage_seconds or {},
        policy=policy,
        agent_activity=activity,
        grpo_groups=groups,
        proposer_truncation=(cut := CompletionTruncation.from_training(training or {})),
        warnings=activity_warnings(activity, groups) + truncation_warnings(cut),
    )


def truncation_warnings(cut: CompletionTruncation | None) -> list[str]:
    """A line when the proposer update left any of the model's writing untrained."""
    if cut is None or not cut.truncated:
        return []
    return [f"proposer GRPO: {cut.shown()}: the update never saw how those episodes ended"]
