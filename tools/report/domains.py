"""The round report's per-domain counts: proposals, admissions and solve rates for each of the
four kinds of environment (tools/tasks/domains.py).

A candidate's domain is the one its record names (its task.toml's tags when the gate saw it,
else the domain its proposer was aimed at); an older record without one is read from its folder.
A solver attempt's domain is that of the pool task it attempted, read from the pool's folder.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from functools import cache

from pydantic import BaseModel, Field

from ..rollouts.models import Attempt
from ..tasks.domains import DEFAULT_DOMAIN, DOMAINS, Domain, folder_domain
from ..tasks.pool import Pool


class DomainCounts(BaseModel):
    """One domain's part of a round."""

    proposals: int = Field(default=0, description="Candidates proposed (one per proposer slot).")
    admitted: int = 0
    solver_attempts: int = Field(
        default=0, description="Scored solver attempts on the pool's tasks of this domain."
    )
    solved: int = 0
    solve_rate: float | None = Field(
        default=None, description="solved / solver_attempts; None when none was scored."
    )
    solver_mean_reward: float | None = None
    pool_active: int = 0


def domain_counts(
    candidates: Iterable[tuple[Domain, bool]], attempts: Sequence[Attempt], pool: Pool
) -> dict[str, DomainCounts]:
    """Every domain, in DOMAINS order (zeros included, so a missing domain shows as 0).

    `candidates`: (domain, admitted) per candidate record; `attempts`: the round's scored solver
    attempts on the pool (infrastructure failures already left out)."""

    @cache
    def pool_domain(task_id: str) -> Domain:
        return folder_domain(pool.path(task_id)) or DEFAULT_DOMAIN

    counts = {domain: DomainCounts() for domain in DOMAINS}
    rewards: dict[str, list[float]] = {domain: [] for domain in DOMAINS}
    for domain, admitted in candidates:
        counts[domain].proposals += 1
        counts[domain].admitted += int(admitted)
    for attempt in attempts:
        domain = pool_domain(attempt.task_id)
        counts[domain].solver_attempts += 1
        counts[domain].solved += int(attempt.outcome == "solved")
        if attempt.reward is not None:
            rewards[domain].append(attempt.reward)
    for entry in pool.entries("active"):
        counts[pool_domain(entry.task_id)].pool_active += 1
    for domain, c in counts.items():
        c.solve_rate = c.solved / c.solver_attempts if c.solver_attempts else None
        c.solver_mean_reward = statistics.fmean(rewards[domain]) if rewards[domain] else None
    return dict(counts)


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def domain_markdown(counts: dict[str, DomainCounts]) -> list[str]:
    """The round report's "Per domain" table; nothing for a round recorded before domains."""
    if not counts:
        return []
    lines = [
        "## Per domain",
        "",
        "| domain | proposals | admitted | solver attempts (pool) | solved | solve rate "
        "| solver mean reward | pool active |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, c in counts.items():
        lines.append(
            f"| {name} | {c.proposals} | {c.admitted} | {c.solver_attempts} | {c.solved} "
            f"| {_rate(c.solve_rate)} | {_rate(c.solver_mean_reward)} | {c.pool_active} |"
        )
    return [*lines, ""]
