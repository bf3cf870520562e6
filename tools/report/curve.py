"""A run's learning curve: held-out success at each point with its 95% interval, against the
solver's GRPO steps trained before it; each round's behaviour line; the time each stage took.

Read from what the flywheel already wrote (reports/metrics.json: the held-out evaluation before
round 1 and after every round, `tools/report/heldout.py`; the round's training summary with its
behaviour measures, `training/grpo/behaviour.py`; `stage_seconds`), never from the store or the
trainer again, so the curve says exactly what the reports say. Written next to them:
`curve.json` (a `Curve`) and `curve.png`. The `learn` preset's run ends with it (`make learn`).

The change from the first point to the last comes with Newcombe's hybrid-score 95% interval on
the difference of two proportions (built from the two Wilson intervals; the two evaluations are
independent samples of two policies): an interval that excludes 0 is a change sampling noise
does not explain.

    python -m autoenvscaling.tools.report.curve RUN_DIR
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from autoenvscaling.tools.report.heldout import HeldoutEval
from autoenvscaling.tools.report.metrics import RoundMetrics, as_number
from autoenvscaling.tools.report.proposer_heldout import ProposerHeldoutEval
from autoenvscaling.tools.report.run_report import load_history
from autoenvscaling.tools.stats import Rate, wilson

CURVE_JSON = "curve.json"
CURVE_PNG = "curve.png"


class CurvePoint(BaseModel):
    """One held-out evaluation: point 0 before round 1, point N after round N."""

    point: int
    when: str
    steps: int = Field(description="Solver GRPO optimizer steps trained before this point")
    tasks: int
    samples: int = Field(description="Valid samples (infrastructure failures excluded)")
    successes: int
    success_rate: float | None
    interval_low: float
    interval_high: float
    infrastructure_failures: int = 0


class CurveRound(BaseModel):
    """What round N's training did, and where its time went."""

    round: int
    steps: int = Field(description="Solver GRPO optimizer steps this round")
    groups: int | None = None
    groups_without_reward_variance: int | None = None
    reward_mean: float | None = Field(default=None, description="Mean GRPO episode reward")
    behaviour: str | None = Field(default=None, description="The round's behaviour line")
    rewarded_logp_before: float | None = None
    rewarded_logp_after: float | None = None
    penalised_logp_before: float | None = None
    penalised_logp_after: float | None = None
    probe_kl: float | None = None
    checkpoint: str | None = None
    reason: str | None = Field(default=None, description="Why no checkpoint, if none")
    stage_seconds: dict[str, float] = Field(default_factory=dict)


class Difference(BaseModel):
    """Last point's success minus the first's, with Newcombe's 95% interval."""

    first: int
    last: int
    difference: float
    interval_low: float
    interval_high: float

    @property
    def excludes_zero(self) -> bool:
        return self.interval_low > 0 or self.interval_high < 0


class ProposerPoint(BaseModel):
    """One proposer evaluation on the held-out briefs (graphs/proposer_heldout.py)."""

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


class Curve(BaseModel):
    run_dir: str
    split: str = ""
    points: list[CurvePoint] = Field(default_factory=list)
    rounds: list[CurveRound] = Field(default_factory=list)
    difference: Difference | None = None
    proposer_split: str = ""
    proposer_points: list[ProposerPoint] = Field(default_factory=list)
    proposer_rounds: list[ProposerRound] = Field(default_factory=list)
    proposer_difference: Difference | None = Field(
        default=None, description="Held-out briefs passing lint, last point minus first"
    )
    seconds_total: float = Field(default=0.0, description="Sum of the rounds' wall time")


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """(p2 - p1, low, high): Newcombe's hybrid-score 95% interval on a difference of two
    independent proportions, from each one's Wilson interval (Newcombe 1998, method 10)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p2 - p1
    return d, d - math.hypot(p2 - l2, u1 - p1), d + math.hypot(u2 - p2, p1 - l1)


def _point(point: int, steps: int, e: HeldoutEval) -> CurvePoint:
    return CurvePoint(
        point=point,
        when=e.when,
        steps=steps,
        tasks=e.tasks,
        samples=e.samples,
        successes=e.successes,
        success_rate=e.success_rate,
        interval_low=e.interval_low,
        interval_high=e.interval_high,
        infrastructure_failures=e.infrastructure_failures,
    )


def _int(value: Any) -> int | None:
    number = as_number(value)
    return None if number is None else int(number)


def _round(m: RoundMetrics) -> CurveRound:
    t = m.training
    return CurveRound(
        round=m.round,
        steps=_int(t.get("steps")) or 0,
        groups=_int(t.get("groups")),
        groups_without_reward_variance=_int(t.get("groups_without_reward_variance")),
        reward_mean=as_number(t.get("reward_mean")),
        behaviour=t.get("behaviour") if isinstance(t.get("behaviour"), str) else None,
        rewarded_logp_before=as_number(t.get("rewarded_logp_before")),
        rewarded_logp_after=as_number(t.get("rewarded_logp_after")),
        penalised_logp_before=as_number(t.get("penalised_logp_before")),
        penalised_logp_after=as_number(t.get("penalised_logp_after")),
        probe_kl=as_number(t.get("probe_kl")),
        checkpoint=t.get("checkpoint") if isinstance(t.get("checkpoint"), str) else None,
        reason=t.get("reason") if isinstance(t.get("reason"), str) else None,
        stage_seconds=dict(m.stage_seconds),
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


def _proposer_curve(history: list[RoundMetrics]) -> dict[str, Any]:
    """The proposer's points, rounds and change (empty when the run did not evaluate it)."""
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
        return {}
    split = next(
        (e.split for m in history for e in (m.proposer_heldout_before, m.proposer_heldout) if e),
        "",
    )
    difference = None
    valid = [p for p in points if p.samples]
    if len(valid) >= 2:
        a, b = valid[0], valid[-1]
        k1, k2 = round(a.passes_lint.mean * a.samples), round(b.passes_lint.mean * b.samples)
        d, low, high = newcombe(k1, a.samples, k2, b.samples)
        difference = Difference(
            first=a.point,
            last=b.point,
            difference=round(d, 4),
            interval_low=round(low, 4),
            interval_high=round(high, 4),
        )
    return {
        "proposer_split": split,
        "proposer_points": points,
        "proposer_rounds": rounds,
        "proposer_difference": difference,
    }


def build_curve(run_dir: Path) -> Curve:
    """The curve of the run in `run_dir` (its reports/metrics.json); FileNotFoundError when the
    run has finished no round."""
    history = sorted(load_history(run_dir / "reports"), key=lambda m: m.round)
    if not history:
        raise FileNotFoundError(f"{run_dir / 'reports' / 'metrics.json'}: no finished round")
    rounds = [_round(m) for m in history]
    points: list[CurvePoint] = []
    steps = 0
    first = history[0].heldout_before
    if first is not None:
        points.append(_point(0, 0, first))
    for m, r in zip(history, rounds, strict=True):
        steps += r.steps
        if m.heldout is not None:
            points.append(_point(m.round, steps, m.heldout))
    split = next((e.split for m in history for e in (m.heldout_before, m.heldout) if e), "")
    valid = [p for p in points if p.samples]
    difference = None
    if len(valid) >= 2:
        a, b = valid[0], valid[-1]
        d, low, high = newcombe(a.successes, a.samples, b.successes, b.samples)
        difference = Difference(
            first=a.point,
            last=b.point,
            difference=round(d, 4),
            interval_low=round(low, 4),
            interval_high=round(high, 4),
        )
    return Curve(
        run_dir=str(run_dir),
        split=split,
        points=points,
        rounds=rounds,
        difference=difference,
        seconds_total=round(sum(r.stage_seconds.get("round_total", 0.0) for r in rounds), 1),
        **_proposer_curve(history),
    )


def curve_figure(curve: Curve) -> Any:
    """Held-out success with its interval against GRPO steps; the behaviour line (rewarded and
    penalised log-probability before -> after, per round); seconds per stage, per round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 4 if curve.proposer_points else 3
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.8))
    ax, bx, cx = axes[:3]
    if curve.proposer_points:
        proposer_panel(axes[3], curve.proposer_points)
    shown = [p for p in curve.points if p.success_rate is not None]
    if shown:
        xs = [p.steps for p in shown]
        rates = [p.success_rate or 0.0 for p in shown]
        ax.errorbar(
            xs,
            rates,
            yerr=[
                [r - p.interval_low for r, p in zip(rates, shown, strict=True)],
                [p.interval_high - r for r, p in zip(rates, shown, strict=True)],
            ],
            marker="o",
            capsize=4,
            label="success, 95% Wilson interval",
        )
        for x, p in zip(xs, shown, strict=True):
            ax.annotate(f"{p.successes}/{p.samples}", (x, p.success_rate or 0.0), fontsize=7)
        ax.legend(fontsize="small")
    ax.set(title="held-out success", xlabel="solver GRPO steps", ylim=(0, 1))
    for name, marker in (("rewarded", "o"), ("penalised", "x")):
        for r in curve.rounds:
            before = getattr(r, f"{name}_logp_before")
            after = getattr(r, f"{name}_logp_after")
            if before is None or after is None:
                continue
            color = "tab:green" if name == "rewarded" else "tab:red"
            bx.plot([r.round - 0.2, r.round + 0.2], [before, after], marker=marker, color=color)
    bx.plot([], [], "o-", color="tab:green", label="rewarded: before -> after")
    bx.plot([], [], "x-", color="tab:red", label="penalised: before -> after")
    bx.legend(fontsize="small")
    bx.set(title="behaviour (log-prob / token)", xlabel="round")
    stages = sorted({s for r in curve.rounds for s in r.stage_seconds if s != "round_total"})
    bottom = [0.0] * len(curve.rounds)
    for stage in stages:
        heights = [r.stage_seconds.get(stage, 0.0) for r in curve.rounds]
        cx.bar([r.round for r in curve.rounds], heights, bottom=bottom, label=stage)
        bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
    if stages:
        cx.legend(fontsize="x-small")
    cx.set(title="seconds per stage", xlabel="round")
    for axis in (bx, cx):
        axis.set_xticks([r.round for r in curve.rounds])
    fig.tight_layout()
    return fig


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


def write_curve(run_dir: Path) -> tuple[Path, Path]:
    """Write reports/curve.json and reports/curve.png; their paths."""
    import matplotlib.pyplot as plt

    curve = build_curve(run_dir)
    out = run_dir / "reports"
    data = out / CURVE_JSON
    data.write_text(curve.model_dump_json(indent=2) + "\n")
    fig = curve_figure(curve)
    png = out / CURVE_PNG
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return data, png


def curve_lines(curve: Curve) -> list[str]:
    """The curve in a few lines of text (what the command prints)."""
    lines: list[str] = []
    if curve.points or any(r.steps for r in curve.rounds):  # the solver was measured or trained
        lines += solver_lines(curve)
    lines += proposer_lines(curve)
    return lines


def solver_lines(curve: Curve) -> list[str]:
    """The solver's points, change and rounds."""
    lines = [f"held-out success on {curve.split or '-'}:"]
    for p in curve.points:
        rate = "-" if p.success_rate is None else f"{p.success_rate:.2f}"
        lines.append(
            f"  {p.when:>16} (after {p.steps:3d} GRPO steps): {rate} "
            f"[{p.interval_low:.2f}, {p.interval_high:.2f}] ({p.successes}/{p.samples})"
        )
    d = curve.difference
    if d is not None:
        verdict = "excludes 0" if d.excludes_zero else "includes 0: not told apart from noise"
        lines.append(
            f"  change {d.difference:+.2f}, 95% interval [{d.interval_low:+.2f}, "
            f"{d.interval_high:+.2f}] ({verdict})"
        )
    for r in curve.rounds:
        lines.append(f"  round {r.round}: {r.steps} steps; {r.behaviour or r.reason or '-'}")
    return lines


def proposer_lines(curve: Curve) -> list[str]:
    """The proposer's points on the held-out briefs, change and updates (none when unmeasured)."""
    lines: list[str] = []
    if curve.proposer_points:
        lines.append(f"the proposer on held-out briefs (examples from {curve.proposer_split}):")
    for p in curve.proposer_points:
        lint, oracle = p.passes_lint, p.oracle_solves
        reused = f"; the same checkpoint as {p.reused_from}" if p.reused_from else ""
        lines.append(
            f"  {p.when:>16} ({p.updates} updates): passes lint {lint.mean:.2f} "
            f"[{lint.low:.2f}, {lint.high:.2f}], oracle solves {oracle.mean:.2f} "
            f"[{oracle.low:.2f}, {oracle.high:.2f}], submitted {p.submitted.mean:.2f}, "
            f"task files written {_files(p.files_written)} of 5 "
            f"(n={p.samples}; stopped at {p.stages}){reused}"
        )
    d = curve.proposer_difference
    if d is not None:
        lines.append(
            f"  passes lint: change {d.difference:+.2f}, 95% interval [{d.interval_low:+.2f}, "
            f"{d.interval_high:+.2f}]"
        )
    for r in curve.proposer_rounds:
        if curve.proposer_points:
            what = r.checkpoint or r.reason or "-"
            lines.append(f"  round {r.round} proposer ({r.reward_arm}): {r.rewards} -> {what}")
            if r.behaviour:
                lines.append(f"    {r.behaviour}")
    return lines


def _files(mean: float | None) -> str:
    return "-" if mean is None else f"{mean:.2f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("run_dir", type=Path, help="the run's folder")
    args = parser.parse_args(argv)
    try:
        data, png = write_curve(args.run_dir)
    except FileNotFoundError as exc:
        parser.exit(2, f"{exc}\n")
    print("\n".join(curve_lines(build_curve(args.run_dir))))
    print(f"written: {data} and {png}")


if __name__ == "__main__":
    main()
