"""The learning curve (tools/report/curve.py) read from a run's metrics.json: a point per held-out
evaluation against the GRPO steps before it, the rounds' behaviour and stage seconds, Newcombe's
interval on the change (checked against the published example)."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenvscaling.tools.report.curve import Curve, build_curve, main, write_curve
from autoenvscaling.tools.report.heldout import heldout_eval
from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.report.run_report import save_history
from autoenvscaling.tools.rollouts.models import Attempt
from autoenvscaling.tools.stats import newcombe, wilson


def test_newcombe_matches_the_published_example():
    # Newcombe (1998), Stat. Med. 17:873, example (a) for method 10: 56/70 vs 48/80.
    d, low, high = newcombe(48, 80, 56, 70)
    assert (d, low, high) == (
        pytest.approx(0.2),
        pytest.approx(0.0524, abs=1e-4),
        pytest.approx(0.3339, abs=1e-4),
    )


def _eval(when: str, successes: int, samples: int):
    attempts = [
        Attempt(
            role="solver",
            task_id=f"count-lines-3{i:04d}",
            outcome="solved" if i < successes else "failed",
            reward=1.0 if i < successes else 0.0,
        )
        for i in range(samples)
    ]
    return heldout_eval(attempts, when, "tasks/generated/learn-heldout", 1)


def _round(n: int, steps: int, after: tuple[int, int], before=None) -> RoundMetrics:
    return RoundMetrics(
        round=n,
        training={
            "steps": steps,
            "reward_mean": 0.25,
            "behaviour": "rewarded -2.65 -> -2.32; penalised -3.03 -> -3.38",
            "rewarded_logp_before": -2.65,
            "rewarded_logp_after": -2.32,
            "penalised_logp_before": -3.03,
            "penalised_logp_after": -3.38,
            "probe_kl": 0.001,
            "checkpoint": f"ckpt-{n}",
        },
        stage_seconds={"train": 700.0, "heldout": 400.0, "round_total": 1150.0},
        heldout=_eval(f"after round {n}", *after),
        heldout_before=before,
    )


def test_the_curve_has_a_point_per_evaluation_with_steps_and_intervals(tmp_path: Path):
    history = [
        _round(1, 4, (6, 32), before=_eval("before round 1", 3, 32)),
        _round(2, 4, (12, 32)),
    ]
    save_history(tmp_path / "reports", history)
    data, png = write_curve(tmp_path)
    curve = Curve.model_validate_json(data.read_text())
    assert curve == build_curve(tmp_path)
    assert [(p.point, p.steps, p.successes, p.samples) for p in curve.points] == [
        (0, 0, 3, 32),
        (1, 4, 6, 32),
        (2, 8, 12, 32),
    ]
    for p in curve.points:
        low, high = wilson(p.successes, p.samples)
        assert (p.interval_low, p.interval_high) == (
            pytest.approx(low, abs=1e-4),
            pytest.approx(high, abs=1e-4),
        )
    d = curve.difference
    assert d is not None and (d.first, d.last) == (0, 2)
    assert d.difference == pytest.approx(9 / 32, abs=1e-4)
    assert d.interval_low > 0 and d.excludes_zero  # 3/32 -> 12/32 is not noise
    assert [r.rewarded_logp_after for r in curve.rounds] == [-2.32, -2.32]
    assert curve.rounds[0].stage_seconds["train"] == 700.0 and curve.seconds_total == 2300.0
    assert png.stat().st_size > 0


def test_a_run_without_a_finished_round_has_no_curve(tmp_path: Path, capsys):
    with pytest.raises(SystemExit) as exc:
        main([str(tmp_path)])
    assert exc.value.code == 2
    assert "no finished round" in capsys.readouterr().err
