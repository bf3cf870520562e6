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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..stats import Difference
from .heldout import HeldoutEval
from .metrics import RoundMetrics, as_number
from .proposer_curve import (
    ProposerCurve,
    proposer_curve,
    proposer_lines,
    proposer_panel,
)
from .run_report import load_history

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


class Curve(BaseModel):
    run_dir: str
    split: str = ""
    points: list[CurvePoint] = Field(default_factory=list)
    rounds: list[CurveRound] = Field(default_factory=list)
    difference: Difference | None = None
    proposer: ProposerCurve | None = Field(
        default=None, description="The proposer on held-out briefs, when the run measured it"
    )
    seconds_total: float = Field(default=0.0, description="Sum of the rounds' wall time")


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
        difference = Difference.of(a.point, b.point, a.successes, a.samples, b.successes, b.samples)
    return Curve(
        run_dir=str(run_dir),
        split=split,
        points=points,
        rounds=rounds,
        difference=difference,
        seconds_total=round(sum(r.stage_seconds.get("round_total", 0.0) for r in rounds), 1),
        proposer=proposer_curve(history),
    )


def curve_figure(curve: Curve) -> Any:
    """Held-out success with its interval against GRPO steps; the behaviour line (rewarded and
    penalised log-probability before -> after, per round); seconds per stage, per round."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 4 if curve.proposer else 3
    fig, axes = plt.subplots(1, panels, figsize=(5 * panels, 3.8))
    ax, bx, cx = axes[:3]
    if curve.proposer:
        proposer_panel(axes[3], curve.proposer.points)
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
    lines += proposer_lines(curve.proposer) if curve.proposer else []
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
