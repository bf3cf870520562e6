"""The brief as the markdown fragments the proposer's prompt files frame (`ProposerBrief.sections`):
the pool's table, the domains, the solver's evidence."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..tasks.domains import DOMAIN_BLURBS, DOMAINS

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .brief import CategoryStats, DomainStats, FailureNote, TaskRate


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def pool_table(categories: Sequence[CategoryStats]) -> str:
    rows = ["| category | tasks | difficulty | solver pass rate |", "| --- | --- | --- | --- |"]
    for c in categories:
        diff = ", ".join(f"{k} {v}" for k, v in c.difficulties.items())
        rows.append(f"| {c.category} | {c.tasks} | {diff} | {_pct(c.pass_rate)} |")
    return "\n".join(rows)


def domain_lines(domains: Sequence[DomainStats]) -> str:
    """One line per domain: its tag, what its tasks ask for, how many the pool holds."""
    held = {d.domain: d.tasks for d in domains}
    return "\n".join(f"- `{d}` ({held.get(d, 0)} in the pool): {DOMAIN_BLURBS[d]}" for d in DOMAINS)


def evidence_text(
    task_rates: Sequence[TaskRate],
    in_band: Sequence[str],
    targets: Sequence[str],
    failures: Sequence[FailureNote],
) -> str:
    """The solver's experience: pass rates, the in-band tasks, the weakest categories, failures."""
    parts = []
    if task_rates:
        rows = [
            "| task | category | attempts | pass rate | mean reward |",
            "| --- | --- | --- | --- | --- |",
        ]
        rows += [
            f"| {r.task_id} | {r.category or '-'} | {r.attempts} | {_pct(r.pass_rate)} | "
            f"{_pct(r.mean_reward)} |"
            for r in task_rates
        ]
        parts.append("\n".join(rows))
    else:
        parts.append("(no scored solver attempts yet)")
    parts.append("In band: " + (", ".join(in_band) if in_band else "none"))
    if targets:
        parts.append("Weakest categories first: " + ", ".join(targets))
    for f in failures:
        reward = "-" if f.reward is None else f"{f.reward:g}"
        parts.append(
            f"- {f.task_id} ({f.category or '-'}): {f.outcome}, reward {reward}\n"
            f"  ```\n{_indent(f.error_output.strip())}\n  ```"
        )
    return "\n\n".join(parts)


def _indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
