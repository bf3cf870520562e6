"""The run's curves, one value per finished round, drawn as SVG on the server (no script).

A value a round did not measure (no candidate scored, no GRPO update, no held-out set) is None:
the line breaks there and the table says "missing" — never 0, which would read as a measured
zero (the same rule as the report's rounds.png, tools/report/run_report.py).
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel, Field

from ..tools.report.metrics import RoundMetrics, as_number

WIDTH, HEIGHT, PAD = 360, 170, 34


class Series(BaseModel):
    name: str
    values: list[float | None]


class Point(BaseModel):
    x: float
    y: float
    round: int
    value: float


class Chart(BaseModel):
    title: str
    series: list[Series]
    rounds: list[int]
    low: float
    high: float
    lines: list[list[list[Point]]] = Field(
        default_factory=list, description="Per series, its unbroken runs of points."
    )


def _submitted(m: RoundMetrics) -> float:
    proposer = [a for a in m.agent_activity if a.role == "proposer" and a.submitted is not None]
    return float(sum(a.submitted or 0 for a in proposer)) if proposer else float(m.candidates)


def _proposer_rewards(m: RoundMetrics) -> list[float]:
    proposer = m.training.get("proposer")
    rewards = proposer.get("rewards") if isinstance(proposer, dict) else None
    if not isinstance(rewards, list):
        return []
    flat: list[float] = []
    for r in rewards:  # one list per group, or flat
        items = r if isinstance(r, list) else [r]
        flat += [v for x in items if (v := as_number(x)) is not None]
    return flat


def _variance(values: list[float]) -> float | None:
    return statistics.pvariance(values) if len(values) >= 2 else None


def _solver_variance(m: RoundMetrics, episodes: list[float] | None) -> float | None:
    """Over the GRPO episodes' rewards (the worker's result); else a reported `reward_std`."""
    if episodes:
        return _variance(episodes)
    std = as_number(m.training.get("reward_std"))
    return None if std is None else std * std


def charts(
    history: list[RoundMetrics], episodes: dict[int, list[float] | None] | None = None
) -> list[Chart]:
    """The curves of the finished rounds; `episodes`: the solver's GRPO episode rewards by round."""
    episodes = episodes or {}
    rounds = [m.round for m in history]

    def chart(title: str, series: dict[str, list[float | None]], fixed: bool = False) -> Chart:
        values = [v for vs in series.values() for v in vs if v is not None]
        low, high = (0.0, 1.0) if fixed else (min(values, default=0.0), max(values, default=1.0))
        low = min(low, 0.0)  # from 0: a small value does not look like the floor
        high = high if high > low else low + 1.0
        out = Chart(
            title=title,
            series=[Series(name=k, values=v) for k, v in series.items()],
            rounds=rounds,
            low=low,
            high=high,
        )
        out.lines = [_runs(s.values, rounds, low, high) for s in out.series]
        return out

    return [
        chart(
            "valid-environment rate",
            {"valid rate": [m.valid_environment_rate for m in history]},
            True,
        ),
        chart(
            "admitted / submitted",
            {
                "admitted": [float(m.admitted) for m in history],
                "submitted": [_submitted(m) for m in history],
            },
        ),
        chart(
            "pool",
            {
                "active": [float(m.pool_active) for m in history],
                "retired": [float(m.pool_retired) for m in history],
            },
        ),
        chart(
            "solve rate",
            {
                "pool": [m.solver_mean_reward_pool for m in history],
                "held-out": [
                    m.solver_mean_reward_heldout if m.heldout_configured else None for m in history
                ],
            },
            True,
        ),
        chart(
            "held-out success (95% interval)",
            {
                "success": [m.heldout.success_rate if m.heldout else None for m in history],
                "interval low": [m.heldout.interval_low if m.heldout else None for m in history],
                "interval high": [m.heldout.interval_high if m.heldout else None for m in history],
            },
            True,
        ),
        chart(
            "GRPO reward mean",
            {
                "solver": [as_number(m.training.get("reward_mean")) for m in history],
                "proposer": [
                    statistics.fmean(r) if (r := _proposer_rewards(m)) else None for m in history
                ],
            },
        ),
        chart(
            "GRPO reward variance",
            {
                "solver": [_solver_variance(m, episodes.get(m.round)) for m in history],
                "proposer": [_variance(_proposer_rewards(m)) for m in history],
            },
        ),
        chart(
            "cost per valid environment (USD)",
            {"cost": [m.cost_per_valid_environment for m in history]},
        ),
    ]


def _runs(
    values: list[float | None], rounds: list[int], low: float, high: float
) -> list[list[Point]]:
    """The series' points in SVG coordinates, split where a value is missing."""
    span_x = max(len(rounds) - 1, 1)
    runs: list[list[Point]] = [[]]
    for i, (r, v) in enumerate(zip(rounds, values, strict=True)):
        if v is None:
            runs.append([])
            continue
        x = PAD + (WIDTH - 2 * PAD) * (i / span_x if len(rounds) > 1 else 0.5)
        y = HEIGHT - PAD - (HEIGHT - 2 * PAD) * (v - low) / (high - low)
        runs[-1].append(Point(x=round(x, 1), y=round(y, 1), round=r, value=v))
    return [run for run in runs if run]
