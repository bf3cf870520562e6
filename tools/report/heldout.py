"""The held-out evaluation as the reports show it: success on the held-out split with a 95%
interval, per task, before round 1 and after every round.

The flywheel (graphs/flywheel/measure.py: `evaluate_heldout`) records the attempts (purpose `heldout`,
round 0 for the one before round 1); `heldout_eval` reads one evaluation back from them. Success
is a reward of 1.0 (verifiers are binary); the interval is Wilson's (tools/stats.py), over every
valid sample of the evaluation. Infrastructure failures are counted apart, never as failures.
"""

from __future__ import annotations

import statistics

from pydantic import BaseModel, Field

from ..rollouts.models import Attempt
from ..stats import wilson

#: A verifier's reward at or above this is a success (verifiers are binary: 0 or 1).
SUCCESS = 1.0


class HeldoutTask(BaseModel):
    """One held-out task's row: its valid samples and how many succeeded."""

    task_id: str
    samples: int
    successes: int
    success_rate: float | None = None
    infrastructure_failures: int = 0


class HeldoutEval(BaseModel):
    """One held-out evaluation: the served solver on the held-out split, k samples per task,
    success (reward 1.0) with a 95% Wilson interval over every valid sample."""

    when: str = Field(description="'before round 1' or 'after round N'")
    split: str = Field(description="The held-out folder")
    tasks: int
    samples_per_task: int
    samples: int = Field(description="Valid samples (infrastructure failures excluded)")
    successes: int
    success_rate: float | None = None
    interval_low: float = 0.0
    interval_high: float = 1.0
    confidence: float = 0.95
    mean_reward: float | None = None
    infrastructure_failures: int = 0
    per_task: list[HeldoutTask] = Field(default_factory=list)

    def shown(self) -> str:
        """`0.25 [0.09, 0.53] (3/12)`: the rate, its 95% interval, the counts."""
        if self.success_rate is None:
            return f"- (0 valid samples of {self.tasks} tasks)"
        return (
            f"{self.success_rate:.2f} [{self.interval_low:.2f}, {self.interval_high:.2f}] "
            f"({self.successes}/{self.samples})"
        )


def heldout_eval(
    attempts: list[Attempt], when: str, split: str, samples_per_task: int
) -> HeldoutEval | None:
    """The evaluation that one round's held-out `attempts` make; None when there are none."""
    if not attempts:
        return None
    rows: dict[str, HeldoutTask] = {}
    rewards: list[float] = []
    for a in attempts:
        row = rows.setdefault(a.task_id, HeldoutTask(task_id=a.task_id, samples=0, successes=0))
        if a.outcome == "error" or a.reward is None:
            row.infrastructure_failures += 1
            continue
        rewards.append(a.reward)
        row.samples += 1
        row.successes += int(a.reward >= SUCCESS)
    for row in rows.values():
        row.success_rate = row.successes / row.samples if row.samples else None
    n = sum(r.samples for r in rows.values())
    k = sum(r.successes for r in rows.values())
    low, high = wilson(k, n)
    return HeldoutEval(
        when=when,
        split=split,
        tasks=len(rows),
        samples_per_task=samples_per_task,
        samples=n,
        successes=k,
        success_rate=k / n if n else None,
        interval_low=round(low, 4),
        interval_high=round(high, 4),
        mean_reward=statistics.fmean(rewards) if rewards else None,
        infrastructure_failures=sum(r.infrastructure_failures for r in rows.values()),
        per_task=sorted(rows.values(), key=lambda r: r.task_id),
    )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def heldout_markdown(evals: list[HeldoutEval]) -> list[str]:
    """A round report's section: the evaluations (before round 1, after the round) with their
    95% intervals, then one row per held-out task."""
    if not evals:
        return []
    first = evals[0]
    lines = [
        "## Held-out evaluation",
        "",
        f"The served solver on `{first.split}` ({first.tasks} tasks, {first.samples_per_task} "
        "sample(s) each; never in the pool, a GRPO group, the brief or the cold start). "
        "Success = reward 1.0; 95% Wilson interval.",
        "",
        "| when | success [95% interval] (successes/samples) | mean reward | infrastructure "
        "failures |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {e.when} | {e.shown()} | {_fmt(e.mean_reward)} | {e.infrastructure_failures} |"
        for e in evals
    ]
    lines += ["", "| task | " + " | ".join(e.when for e in evals) + " |"]
    lines.append("| --- |" + " --- |" * len(evals))
    for task in sorted({r.task_id for e in evals for r in e.per_task}):
        cells = []
        for e in evals:
            row = next((r for r in e.per_task if r.task_id == task), None)
            cells.append("-" if row is None else f"{row.successes}/{row.samples}")
        lines.append(f"| {task} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def heldout_change(first: HeldoutEval | None, last: HeldoutEval | None) -> str | None:
    """One sentence: held-out success before round 1 against after the last round, and whether
    the two intervals overlap (no change the run can tell from sampling noise) or not."""
    if first is None or last is None or first.success_rate is None or last.success_rate is None:
        return None
    overlap = first.interval_low <= last.interval_high and last.interval_low <= first.interval_high
    verdict = (
        "the 95% intervals overlap: no change this run can tell from sampling noise"
        if overlap
        else "the 95% intervals do not overlap"
    )
    return f"Held-out success: {first.shown()} {first.when}, {last.shown()} {last.when}; {verdict}."


def heldout_points(
    evals: list[tuple[int, HeldoutEval | None]],
) -> list[tuple[int, float, float, float]]:
    """(round, success, interval low, interval high) for each (round, evaluation) that has a
    valid sample; round 0 is the evaluation before round 1."""
    return [
        (x, e.success_rate, e.interval_low, e.interval_high)
        for x, e in evals
        if e is not None and e.success_rate is not None
    ]
