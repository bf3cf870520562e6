"""The proposer's part of a run's learning curve: each held-out-brief point
(graphs/flywheel/proposer_heldout.py) with its rates and intervals, the change in the lint-pass rate from
the first point to the last (Newcombe), and what each round's proposer update did (its rewards,
behaviour line, checkpoint). Read from reports/metrics.json, as the solver's curve is
(tools/report/curve.py draws and prints both)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from pydantic import BaseModel, Field

from ..stats import Difference, Rate
from .metrics import RoundMetrics
from .proposer_heldout import ProposerHeldoutEval


class ProposerPoint(BaseModel):
    """One proposer evaluation on the held-out briefs (graphs/flywheel/proposer_heldout.py)."""

    point: int
    when: str
    updates: int = Field(description="Proposer GRPO updates that produced a checkpoint before it")
    checkpoint: str
    samples: int = Field(description="Valid attempts (infrastructure failures excluded)")
    passes_lint: Rate
    oracle_solves: Rate
    submitted: Rate
    files_written: float | None = Field(
        default=None, description="Mean task files written per attempt (of 5)"
    )
    stages: dict[str, int] = Field(
        default_factory=dict, description="Where the attempts stopped (None: passed every stage)"
    )
    reused_from: str | None = None


class ProposerRound(BaseModel):
    """What round N's proposer update did."""

    round: int
    reward_arm: str | None = None
    rewards: list[list[float]] = Field(default_factory=list, description="Each trained group's")
    groups_dropped: list[str] = Field(default_factory=list)
    behaviour: str | None = Field(default=None, description="The update's behaviour line")
    checkpoint: str | None = None
    reason: str | None = None


class ProposerCurve(BaseModel):
    """The proposer's curve: its held-out points, the rounds' updates, the change in lint passes."""

    split: str = Field(default="", description="The folder the held-out briefs are built on")
    points: list[ProposerPoint] = Field(default_factory=list)
    rounds: list[ProposerRound] = Field(default_factory=list)
    difference: Difference | None = Field(
        default=None, description="Held-out attempts passing lint, last point minus first"
    )


def _proposer_point(point: int, updates: int, e: ProposerHeldoutEval) -> ProposerPoint:
    stages = Counter(str(r.stage) for r in e.valid)
    return ProposerPoint(
        point=point,
        when=e.when,
        updates=updates,
        checkpoint=e.checkpoint,
        samples=len(e.valid),
        passes_lint=e.passes_lint,
        oracle_solves=e.oracle_solves,
        submitted=e.submitted,
        files_written=e.files_written,
        stages=dict(sorted(stages.items())),
        reused_from=e.reused_from,
    )


def _proposer_round(m: RoundMetrics) -> ProposerRound:
    t = m.training.get("proposer")
    t = t if isinstance(t, dict) else {}
    rewards = t.get("rewards")
    return ProposerRound(
        round=m.round,
        reward_arm=t.get("reward_arm") if isinstance(t.get("reward_arm"), str) else None,
        rewards=rewards if isinstance(rewards, list) else [],
        groups_dropped=[str(g) for g in t.get("groups_dropped") or []],
        behaviour=t.get("behaviour") if isinstance(t.get("behaviour"), str) else None,
        checkpoint=t.get("checkpoint") if isinstance(t.get("checkpoint"), str) else None,
        reason=t.get("reason") if isinstance(t.get("reason"), str) else None,
    )


def proposer_curve(history: list[RoundMetrics]) -> ProposerCurve | None:
    """The proposer's points, rounds and change (None when the run did not evaluate it)."""
    rounds = [_proposer_round(m) for m in history]
    points: list[ProposerPoint] = []
    first = history[0].proposer_heldout_before
    if first is not None:
        points.append(_proposer_point(0, 0, first))
    updates = 0
    for m, r in zip(history, rounds, strict=True):
        updates += r.checkpoint is not None
        if m.proposer_heldout is not None:
            points.append(_proposer_point(m.round, updates, m.proposer_heldout))
    if not points:
        return None
    split = next(
        (e.split for m in history for e in (m.proposer_heldout_before, m.proposer_heldout) if e),
        "",
    )
    difference = None
    valid = [p for p in points if p.samples]
    if len(valid) >= 2:
        a, b = valid[0], valid[-1]
        k1, k2 = round(a.passes_lint.mean * a.samples), round(b.passes_lint.mean * b.samples)
        difference = Difference.of(a.point, b.point, k1, a.samples, k2, b.samples)
    return ProposerCurve(split=split, points=points, rounds=rounds, difference=difference)


def proposer_lines(curve: ProposerCurve) -> list[str]:
    """The proposer's points on the held-out briefs, change and updates (none when unmeasured)."""
    lines: list[str] = []
    if curve.points:
        lines.append(f"the proposer on held-out briefs (examples from {curve.split}):")
    for p in curve.points:
        lint, oracle = p.passes_lint, p.oracle_solves
        reused = f"; the same checkpoint as {p.reused_from}" if p.reused_from else ""
        lines.append(
            f"  {p.when:>16} ({p.updates} updates): passes lint {lint.mean:.2f} "
            f"[{lint.low:.2f}, {lint.high:.2f}], oracle solves {oracle.mean:.2f} "
            f"[{oracle.low:.2f}, {oracle.high:.2f}], submitted {p.submitted.mean:.2f}, "
            f"task files written {_files(p.files_written)} of 5 "
            f"(n={p.samples}; stopped at {p.stages}){reused}"
        )
    d = curve.difference
    if d is not None:
        lines.append(
            f"  passes lint: change {d.difference:+.2f}, 95% interval [{d.interval_low:+.2f}, "
            f"{d.interval_high:+.2f}]"
        )
    for r in curve.rounds:
        if curve.points:
            what = r.checkpoint or r.reason or "-"
            lines.append(f"  round {r.round} proposer ({r.reward_arm}): {r.rewards} -> {what}")
            if r.behaviour:
                lines.append(f"    {r.behaviour}")
    return lines


def _files(mean: float | None) -> str:
    return "-" if mean is None else f"{mean:.2f}"


def proposer_panel(ax: Any, points: list[ProposerPoint]) -> None:
    """The proposer on the held-out briefs: each rate with its interval, per point."""
    xs = [p.point for p in points]
    for name in ("passes_lint", "oracle_solves", "submitted"):
        rates: list[Rate] = [getattr(p, name) for p in points]
        ax.errorbar(
            xs,
            [r.mean for r in rates],
            yerr=[[r.mean - r.low for r in rates], [r.high - r.mean for r in rates]],
            marker="o",
            capsize=3,
            label=name.replace("_", " "),
        )
    ax.legend(fontsize="small")
    ax.set(title="proposer, held-out briefs (95% Wilson)", xlabel="after round", ylim=(0, 1))
    ax.set_xticks(xs)
