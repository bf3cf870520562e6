"""What a proposer reads: the round's brief.

`build_brief` turns the rollout store (solver pass rates, recent failures) and the task pool
(categories, difficulty, example tasks) into a typed `ProposerBrief`; its `sections()` are compact
markdown tables that the prompt files in `prompts/` frame. Example tasks are shown in the
`<file path="...">` blocks of tasks/file_blocks.py, the format the proposer's replies use too.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path

from pydantic import BaseModel, Field

from ..rollouts.postgres import is_postgres_url
from ..rollouts.store import RolloutStore
from ..tasks.domains import DOMAINS, Domain, task_domain
from ..tasks.file_blocks import cap_file_blocks, render_file_blocks
from ..tasks.format import HarborTask, load_pool
from ..text_cap import tail_text
from .brief_render import domain_lines, evidence_text, pool_table

DEFAULT_BAND = (0.25, 0.75)


class CategoryStats(BaseModel):
    category: str
    domain: Domain = Field(default=DOMAINS[0], description="The domain most of its tasks name.")
    tasks: int = Field(description="Pool tasks in this category.")
    difficulties: dict[str, int] = Field(default_factory=dict)
    attempts: int = Field(default=0, description="Finished solver attempts on the pool's tasks.")
    pass_rate: float | None = Field(
        default=None, description="None when the solver has no scored attempt."
    )


class DomainStats(BaseModel):
    domain: Domain
    tasks: int = Field(default=0, description="Pool tasks of this domain.")


class TaskRate(BaseModel):
    task_id: str
    category: str
    attempts: int
    pass_rate: float | None
    mean_reward: float | None


class FailureNote(BaseModel):
    task_id: str
    round: int | None = Field(default=None, description="The round of the failed attempt.")
    attempt_id: str = ""
    category: str
    outcome: str
    reward: float | None
    error_output: str = Field(description="Tail of the attempt's last failing output or error.")


class BriefEvidence(BaseModel):
    """Where a brief's evidence comes from: does round N's brief cite round N-1's rollouts?"""

    failures: int = 0
    task_rates: int = 0
    failure_rounds: list[int] = Field(default_factory=list)
    cites_previous_round: bool = False


class ExampleTask(BaseModel):
    name: str
    category: str
    difficulty: str
    files: str = Field(description="The task rendered as <file> blocks (long files excerpted).")


class ProposerBrief(BaseModel):
    """The evidence one proposer attempt starts from."""

    round: int = 0
    policy_version: str | None = None
    solver_feedback: bool = Field(default=True, description="False: the no-solver-feedback arm.")
    band: tuple[float, float] = DEFAULT_BAND
    pool_size: int = 0
    categories: list[CategoryStats] = Field(default_factory=list)
    domains: list[DomainStats] = Field(
        default_factory=list, description="Every domain, in DOMAINS order, with its pool tasks."
    )
    task_rates: list[TaskRate] = Field(default_factory=list, description="Lowest pass rate first.")
    in_band: list[str] = Field(default_factory=list, description="Tasks with a pass rate in band.")
    targets: list[str] = Field(
        default_factory=list, description="Categories to aim at: the solver's weakest first."
    )
    failures: list[FailureNote] = Field(default_factory=list)
    examples: list[ExampleTask] = Field(default_factory=list)
    focus: str | None = Field(
        default=None,
        description="This proposer's own aim (K proposers are spread over the targets).",
    )
    domain: Domain | None = Field(
        default=None, description="The domain this proposer's focus aims at (None: no focus)."
    )

    def evidence(self) -> BriefEvidence:
        """What the solver's experience in this brief is drawn from (the round report's)."""
        rounds = sorted({f.round for f in self.failures if f.round is not None})
        previous = self.round - 1  # round 1's previous round is the baseline, round 0
        return BriefEvidence(
            failures=len(self.failures),
            task_rates=len(self.task_rates),
            failure_rounds=rounds,
            cites_previous_round=previous in rounds,
        )

    def for_slot(self, slot: int, slots: int) -> ProposerBrief:
        """The brief for proposer `slot` of `slots`: each aims at a different weak category,
        and the slots take turns over the domains the pool holds tasks of (the sandbox builds
        what the pool's tasks need; a domain with no task yet has nothing proven to build on)."""
        held = [d.domain for d in self.domains if d.tasks] or [DOMAINS[0]]
        domain = held[slot % len(held)]
        of_domain = {c.category for c in self.categories if c.domain == domain}
        # The solver's weakest categories first, then those it has no score on yet.
        unscored = [c.category for c in self.categories if c.category not in self.targets]
        aims = [c for c in self.targets + unscored if c in of_domain]
        turn = slot // len(held)  # this slot's turn within its domain
        aim = f"; aim at the category `{aims[turn % len(aims)]}`" if aims else ""
        return self.model_copy(
            update={
                "focus": f"proposal {slot + 1} of {slots}; domain `{domain}`{aim}",
                "domain": domain,
            }
        )

    def without_feedback(self) -> ProposerBrief:
        """The same brief with every piece of rollout evidence removed."""
        return self.model_copy(
            update={
                "solver_feedback": False,
                "task_rates": [],
                "in_band": [],
                "targets": [],
                "failures": [],
                "categories": [
                    c.model_copy(update={"attempts": 0, "pass_rate": None}) for c in self.categories
                ],
            }
        )

    def trimmed(self, level: int) -> ProposerBrief:
        """This brief with less evidence, for a small context window: level 0 is the brief
        itself; each level keeps fewer failures, shorter excerpts, fewer rates and examples
        (the sections stay, possibly empty). Levels past the last are the last."""
        trim = TRIM_LEVELS[min(max(level, 0), len(TRIM_LEVELS) - 1)]
        if trim is None:
            return self
        return self.model_copy(
            update={
                "task_rates": self.task_rates[: trim.task_rates],
                "failures": [
                    f.model_copy(
                        update={"error_output": tail_text(f.error_output, trim.failure_chars).text}
                    )
                    for f in self.failures[: trim.failures]
                ],
                "examples": [
                    e.model_copy(update={"files": cap_file_blocks(e.files, trim.file_chars)})
                    for e in self.examples[: trim.examples]
                ],
            }
        )

    def sections(self) -> dict[str, str]:
        """Markdown fragments for the prompt templates: pool, evidence, examples, band."""
        return {
            "pool": pool_table(self.categories),
            "domains": domain_lines(self.domains),
            "evidence": evidence_text(self.task_rates, self.in_band, self.targets, self.failures)
            if self.solver_feedback
            else "",
            "examples": "\n\n".join(
                f"### {e.name} ({e.category}, {e.difficulty})\n\n{e.files}" for e in self.examples
            ),
            "band_low": f"{self.band[0]:g}",
            "band_high": f"{self.band[1]:g}",
        }


class BriefTrim(BaseModel):
    """How much evidence a trimmed brief keeps (see `ProposerBrief.trimmed`)."""

    failures: int
    failure_chars: int
    task_rates: int
    examples: int
    file_chars: int


#: Trim levels, mildest first; None = untouched. The last one is the smallest brief there is.
TRIM_LEVELS: tuple[BriefTrim | None, ...] = (
    None,
    BriefTrim(failures=3, failure_chars=300, task_rates=10, examples=2, file_chars=1200),
    BriefTrim(failures=2, failure_chars=160, task_rates=6, examples=1, file_chars=700),
    BriefTrim(failures=1, failure_chars=120, task_rates=4, examples=1, file_chars=350),
    BriefTrim(failures=0, failure_chars=0, task_rates=3, examples=1, file_chars=160),
    BriefTrim(failures=0, failure_chars=0, task_rates=0, examples=0, file_chars=0),
)


# -- building a brief ------------------------------------------------------------------------------


def build_brief(
    store: RolloutStore | str | os.PathLike[str] | None,
    pool_dir: Path | str,
    *,
    policy_version: str | None = None,
    round: int = 0,
    n_examples: int = 3,
    n_failures: int = 5,
    n_task_rates: int = 15,
    variant: int = 0,
    band: tuple[float, float] = DEFAULT_BAND,
    solver_feedback: bool = True,
    max_file_chars: int = 2500,
    failure_chars: int = 600,
    exclude_tasks: frozenset[str] = frozenset(),
) -> ProposerBrief:
    """The brief for one proposer: pool statistics, the solver's evidence and example tasks.

    `store` (an open store or a database path; None, a missing database or solver_feedback False
    give a brief without evidence). `variant` rotates the example choice, so proposers fanned
    out in one round see different examples. `exclude_tasks`: task ids whose attempts the brief
    never cites (the held-out split: a proposer must not learn what the policy is evaluated on).
    """
    if store is not None and not isinstance(store, RolloutStore):
        if not is_postgres_url(str(store)) and not Path(store).exists():
            store = None
        else:
            with RolloutStore(store, read_only=True) as opened:
                return build_brief(
                    opened,
                    pool_dir,
                    policy_version=policy_version,
                    round=round,
                    n_examples=n_examples,
                    n_failures=n_failures,
                    n_task_rates=n_task_rates,
                    variant=variant,
                    band=band,
                    solver_feedback=solver_feedback,
                    max_file_chars=max_file_chars,
                    failure_chars=failure_chars,
                    exclude_tasks=exclude_tasks,
                )
    pool = load_pool(pool_dir)
    by_name = {task.root.name: task for task in pool}
    rates = _task_rates(store, by_name, policy_version) if store and solver_feedback else []
    rates = [r for r in rates if r.task_id not in exclude_tasks]
    categories = _categories(pool, rates)
    held = Counter(task_domain(t) for t in pool)
    scored = [c for c in categories if c.pass_rate is not None]
    targets = [c.category for c in sorted(scored, key=lambda c: (c.pass_rate, c.category))]
    failures: list[FailureNote] = []
    if store and solver_feedback:
        recent = store.recent_failures(3 * n_failures, "solver", output_chars=failure_chars)
        # Infrastructure errors (a dead endpoint, a crashed sandbox) teach nothing about tasks.
        for f in [f for f in recent if f.outcome != "error" and f.task_id not in exclude_tasks][
            :n_failures
        ]:
            text = f.last_error_output or f.error or ""
            failures.append(
                FailureNote(
                    task_id=f.task_id,
                    round=f.round,
                    attempt_id=f.attempt_id,
                    category=f.category,
                    outcome=f.outcome,
                    reward=f.reward,
                    error_output=tail_text(text, failure_chars).text,
                )
            )
    low, high = band
    brief = ProposerBrief(
        round=round,
        policy_version=policy_version,
        solver_feedback=solver_feedback,
        band=band,
        pool_size=len(pool),
        categories=categories,
        domains=[DomainStats(domain=d, tasks=held[d]) for d in DOMAINS],
        task_rates=sorted(
            rates, key=lambda r: (r.pass_rate is None, r.pass_rate or 0.0, r.task_id)
        )[:n_task_rates],
        in_band=sorted(
            r.task_id for r in rates if r.pass_rate is not None and low <= r.pass_rate <= high
        ),
        targets=targets,
        failures=failures,
        examples=[
            _example(t, max_file_chars) for t in _pick_examples(pool, targets, n_examples, variant)
        ],
    )
    return brief


def _task_rates(
    store: RolloutStore, pool: dict[str, HarborTask], policy_version: str | None
) -> list[TaskRate]:
    # Without a version, attempts of every version are pooled.
    totals: dict[str, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0])
    for row in store.pass_rates("task", policy_version, "solver"):
        t = totals[row.key]
        t[0] += row.attempts
        t[1] += row.solved
        t[2] += row.errors
        if row.mean_reward is not None:
            scored = row.attempts - row.errors
            t[3] += row.mean_reward * scored
            t[4] += scored
    out = []
    for task_id, (attempts, solved, errors, reward_sum, reward_n) in totals.items():
        scored = attempts - errors
        task = pool.get(task_id)
        out.append(
            TaskRate(
                task_id=task_id,
                category=(task.category if task else None) or "",
                attempts=int(attempts),
                pass_rate=solved / scored if scored else None,
                mean_reward=reward_sum / reward_n if reward_n else None,
            )
        )
    return out


def _categories(pool: list[HarborTask], rates: list[TaskRate]) -> list[CategoryStats]:
    difficulties: dict[str, Counter[str]] = defaultdict(Counter)
    domains: dict[str, Counter[Domain]] = defaultdict(Counter)
    for task in pool:
        difficulties[task.category or "uncategorised"][task.difficulty or "unknown"] += 1
        domains[task.category or "uncategorised"][task_domain(task)] += 1
    solved: dict[str, list[float]] = defaultdict(list)
    attempts: Counter[str] = Counter()
    for r in rates:
        if r.category and r.pass_rate is not None:
            solved[r.category].append(r.pass_rate)
            attempts[r.category] += r.attempts
    return [
        CategoryStats(
            category=name,
            domain=domains[name].most_common(1)[0][0],
            tasks=sum(diff.values()),
            difficulties=dict(sorted(diff.items())),
            attempts=attempts[name],
            pass_rate=sum(solved[name]) / len(solved[name]) if solved[name] else None,
        )
        for name, diff in sorted(difficulties.items())
    ]


def _pick_examples(
    pool: list[HarborTask], targets: list[str], n: int, variant: int
) -> list[HarborTask]:
    """One task per category, the solver's weakest categories first, rotated by `variant`."""
    by_category: dict[str, list[HarborTask]] = defaultdict(list)
    for task in sorted(pool, key=lambda t: t.root.name):
        by_category[task.category or "uncategorised"].append(task)
    order = [c for c in targets if c in by_category]
    order += sorted(c for c in by_category if c not in order)
    if not order:
        return []
    picked: list[HarborTask] = []
    # Walk the categories round-robin from a variant-dependent start; take the next task in each.
    for i in range(len(pool)):
        if len(picked) >= n:
            break
        category = order[(variant + i) % len(order)]
        tasks = by_category[category]
        task = tasks[(variant + i // len(order)) % len(tasks)]
        if task not in picked:
            picked.append(task)
    return picked


def _example(task: HarborTask, max_file_chars: int) -> ExampleTask:
    return ExampleTask(
        name=task.root.name,
        category=task.category or "uncategorised",
        difficulty=task.difficulty or "unknown",
        files=render_file_blocks(task.root, max_file_chars=max_file_chars),
    )
