"""Success rates with their 95% interval, and the one rule every band decision uses.

A rate here is the mean of rewards in [0, 1] (binary verifiers, or partial credit) over `n`
samples. Its interval is Wilson's score interval: closed form, never outside [0, 1], and honest at
the sample sizes this project decides on (2 to 12), where the normal ("p ± 1.96·sqrt(p(1-p)/n)")
interval collapses to a point at 0/n and n/n. For partial-credit rewards the interval treats the
mean as a proportion: a reward in [0, 1] with mean p has variance at most p(1-p), so the interval
is, if anything, wider than needed.

The band rule (`band_verdict`): a task is out of the difficulty band only when its whole interval
lies outside the band (upper bound below the low edge: too hard; lower bound above the high edge:
too easy). Otherwise it is undecided or in the band, and the caller keeps it: no decision on two
coin flips. `samples_to_decide` says how many samples the same observed rate would need before
the rule could call it out of the band.

Pure Python (no scipy: not a dependency); `tools/` imports nothing above it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

#: Two-sided 95%: the normal quantile 0.975.
Z95 = 1.959963984540054

Verdict = Literal["too_hard", "too_easy", "in_band", "undecided"]


class Rate(BaseModel):
    """A success rate over `n` samples with its 95% Wilson interval."""

    mean: float = Field(ge=0, le=1)
    n: int = Field(ge=0)
    low: float = Field(ge=0, le=1, description="Lower bound of the 95% interval.")
    high: float = Field(ge=0, le=1, description="Upper bound of the 95% interval.")

    def __str__(self) -> str:
        if self.n == 0:
            return "n/a (0 samples)"
        return f"{self.mean:.2f} [95% CI {self.low:.2f}-{self.high:.2f}, n={self.n}]"


def wilson(successes: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for `successes` of `n` (successes may be a sum of partial credit).
    (0, 1) for n = 0: nothing is known."""
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n={n}], got {successes}")
    p, z2 = successes / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    # 0/n and n/n touch their edge exactly (the formula leaves float dust such as 3e-17).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def rate(rewards: Sequence[float]) -> Rate:
    """The mean of `rewards` (each in [0, 1]) with its interval."""
    n = len(rewards)
    if n == 0:
        return Rate(mean=0.0, n=0, low=0.0, high=1.0)
    total = math.fsum(min(1.0, max(0.0, float(r))) for r in rewards)
    low, high = wilson(total, n)
    return Rate(mean=total / n, n=n, low=low, high=high)


def rate_of(mean: float, n: int) -> Rate:
    """The interval of a mean already taken over `n` samples (e.g. a stored EvalPoint)."""
    low, high = wilson(mean * n, n)
    return Rate(mean=mean, n=n, low=low, high=high)


def band_verdict(r: Rate, band: tuple[float, float]) -> Verdict:
    """Where the interval lies against [low, high]: wholly below (too_hard), wholly above
    (too_easy), wholly inside (in_band), or across an edge (undecided)."""
    low, high = band
    if r.n == 0:
        return "undecided"
    if r.high < low:
        return "too_hard"
    if r.low > high:
        return "too_easy"
    if low <= r.low and r.high <= high:
        return "in_band"
    return "undecided"


def samples_to_decide(r: Rate, band: tuple[float, float], *, limit: int = 1000) -> int | None:
    """The smallest total n at which the observed mean, if it held, would put the interval wholly
    outside the band; None when the mean lies inside the band (more samples could only confirm it
    is in) or no n up to `limit` does."""
    low, high = band
    if r.n == 0 or low <= r.mean <= high:
        return None
    for n in range(max(r.n, 1), limit + 1):
        if band_verdict(rate_of(r.mean, n), band) in ("too_hard", "too_easy"):
            return n
    return None


def group_variance_chance(successes: float, n: int, group: int) -> float:
    """The chance that `group` rollouts of a task do not all score alike (binary rewards), given
    `successes` of `n` measured: the rate estimated with a uniform prior ((s+1)/(n+2), Laplace),
    so an unmeasured task counts as a coin flip and 0/2 is not taken for "never". GRPO learns only
    from such groups: one whose rollouts all score alike has no advantage."""
    if group < 2:
        raise ValueError(f"a group needs at least 2 rollouts, got {group}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must lie in [0, n={n}], got {successes}")
    p = (successes + 1) / (n + 2)
    return 1.0 - p**group - (1.0 - p) ** group


def newcombe(k1: int, n1: int, k2: int, n2: int) -> tuple[float, float, float]:
    """(p2 - p1, low, high): Newcombe's hybrid-score 95% interval on a difference of two
    independent proportions, from each one's Wilson interval (Newcombe 1998, method 10)."""
    p1, p2 = k1 / n1, k2 / n2
    l1, u1 = wilson(k1, n1)
    l2, u2 = wilson(k2, n2)
    d = p2 - p1
    return d, d - math.hypot(p2 - l2, u1 - p1), d + math.hypot(u2 - p2, p1 - l1)


class Difference(BaseModel):
    """Point `last`'s success rate minus point `first`'s, with Newcombe's 95% interval."""

    first: int
    last: int
    difference: float
    interval_low: float
    interval_high: float

    @property
    def excludes_zero(self) -> bool:
        return self.interval_low > 0 or self.interval_high < 0

    @classmethod
    def of(cls, first: int, last: int, k1: int, n1: int, k2: int, n2: int) -> Difference:
        """`k2/n2 - k1/n1` of points `first` and `last`, rounded for the reports."""
        d, low, high = newcombe(k1, n1, k2, n2)
        return cls(
            first=first,
            last=last,
            difference=round(d, 4),
            interval_low=round(low, 4),
            interval_high=round(high, 4),
        )
