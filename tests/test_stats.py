"""The interval rule (tools/stats.py, tools/tasks/pool.py): known Wilson values, and a task
leaves the pool only when its whole 95% interval lies outside the difficulty band."""

from __future__ import annotations

import pytest

from autoenvscaling.tools.stats import band_verdict, rate, rate_of, samples_to_decide, wilson
from autoenvscaling.tools.tasks.pool import band_decision

BAND = (0.25, 0.75)  # graphs/config.py's default band


@pytest.mark.parametrize(
    ("successes", "n", "low", "high"),
    [
        # Textbook values (Wilson 1927; Brown, Cai & DasGupta 2001), z = 1.96.
        (5, 10, 0.2366, 0.7634),
        (1, 10, 0.0179, 0.4042),
        (0, 10, 0.0, 0.2775),
        (10, 10, 0.7225, 1.0),
        (0, 2, 0.0, 0.6576),
        (1, 2, 0.0945, 0.9055),
        (0, 12, 0.0, 0.2425),
        (81, 263, 0.2553, 0.3662),
    ],
)
def test_known_wilson_values(successes, n, low, high):
    got = wilson(successes, n)
    assert got == pytest.approx((low, high), abs=1e-4)


def test_no_samples_know_nothing_and_bad_counts_are_refused():
    assert wilson(0, 0) == (0.0, 1.0)
    assert str(rate([])) == "n/a (0 samples)"
    with pytest.raises(ValueError, match=r"successes must lie in \[0, n=2\]"):
        wilson(3, 2)


def test_partial_credit_is_a_rate_of_its_mean():
    """Rewards in [0, 1] (partial credit): the interval of their mean, as a proportion."""
    r = rate([0.5, 1.0, 0.0, 0.5])
    assert (r.mean, r.n) == (0.5, 4)
    assert (r.low, r.high) == pytest.approx(wilson(2, 4))
    assert rate_of(0.5, 4) == r


def test_a_fifty_percent_task_on_two_samples_stays():
    decision = band_decision([1.0, 0.0], BAND)
    assert decision.verdict == "undecided" and not decision.retire and not decision.pending
    assert decision.samples_to_decide is None  # its mean is in the band: nothing to prove
    assert "overlaps the band [0.25, 0.75]: kept" in decision.reason()


def test_two_failures_are_not_evidence_enough():
    """The old rule retired 0/2; its interval reaches 0.66, inside the band: kept, pending,
    with the samples the same rate would need (12 in all: 10 more)."""
    decision = band_decision([0.0, 0.0], BAND)
    assert not decision.retire and decision.pending
    assert decision.samples_to_decide == 12
    assert decision.reason() == (
        "solver success 0.00 [95% CI 0.00-0.66, n=2] overlaps the band [0.25, 0.75]: kept; "
        "10 more sample(s) at this rate would decide"
    )


def test_twelve_failures_retire_from_the_default_band_not_from_a_wide_one():
    """0/12: the interval [0, 0.2425] lies below 0.25 (retired) but not below 0.1, where
    Wilson needs 0/35 (the upper bound is z²/(n+z²))."""
    decision = band_decision([0.0] * 12, BAND)
    assert decision.retire and decision.verdict == "too_hard"
    assert decision.reason() == (
        "solver success 0.00 [95% CI 0.00-0.24, n=12] lies wholly below the band [0.25, 0.75]"
    )
    wide = band_decision([0.0] * 12, (0.1, 0.9))
    assert not wide.retire and wide.samples_to_decide == 35
    assert band_decision([0.0] * 35, (0.1, 0.9)).retire
    assert not band_decision([0.0] * 34, (0.1, 0.9)).retire


def test_too_easy_and_in_band_by_the_interval():
    assert band_decision([1.0] * 12, BAND).verdict == "too_easy"
    assert band_verdict(rate_of(0.5, 100), BAND) == "in_band"
    assert band_verdict(rate_of(0.5, 10), BAND) == "undecided"
    assert samples_to_decide(rate_of(0.5, 10), BAND) is None
    assert samples_to_decide(rate_of(1.0, 2), BAND) == 12
