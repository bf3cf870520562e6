"""How each role behaved in a round, read from the rollout store: tool calls, stop reasons,
submissions, and whether GRPO had any reward variance to learn from.

The outcome numbers alone cannot tell a gate that rejected every task from a proposer that never
called a tool, nor a hard pool from a solver that never ran a command. These numbers (and the plain
warnings made from them) let a round report say which it was.

Counting rules (agent_loop records one step per tool call, plus one step per model reply that
called no tool):
- turns: the attempt's model calls (`metadata.model_turns` where the solver recorded it, else the
  attempt's `turns`);
- turns with a tool call: turns minus the steps without one;
- stop reason: `metadata.stop_reason` (agent_loop's StopReason), "unrecorded" when absent.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, Field

from ..rollouts.models import Attempt, Role

#: The words graphs/agent/loop.py puts in an attempt's error when the conversation outgrew the
#: model's context window (stop reason max_tokens): the prompt left the model no room to answer.
CONTEXT_EXCEEDED = "exceeded the model's context window"
#: Solver purposes in report order; others follow alphabetically.
PURPOSE_ORDER = ("baseline", "calibration", "refresh", "heldout")
UNRECORDED = "unrecorded"


class RoleActivity(BaseModel):
    """One role's (and, for the solver, one purpose's) attempts in a round."""

    role: Role
    purpose: str = Field(
        default="",
        description="The solver attempts' purpose tag (baseline, calibration, refresh, heldout, "
        "...); empty for the proposer.",
    )
    tools_offered: bool = Field(
        default=True,
        description="The role was given tools (the proposer's one-reply arms are not).",
    )
    attempts: int = 0
    turns: int = Field(default=0, description="Model calls over all attempts.")
    turns_with_tool_call: int = 0
    attempts_with_tool_call: int = 0
    tool_calls: int = 0
    turn_tool_call_rate: float | None = Field(
        default=None, description="Share of turns that made at least one tool call."
    )
    attempt_tool_call_rate: float | None = Field(
        default=None, description="Share of attempts with at least one tool call."
    )
    mean_tool_calls: float | None = Field(default=None, description="Tool calls per attempt.")
    prompt_tokens: int = Field(default=0, description="Over all turns.")
    completion_tokens: int = Field(default=0, description="Over all turns.")
    context_exceeded: int = Field(
        default=0, description="Attempts stopped because the conversation outgrew the context."
    )
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    outcomes: dict[str, int] = Field(default_factory=dict)
    submitted: int | None = Field(default=None, description="Proposals submitted (proposer).")
    autosubmitted: int = Field(
        default=0, description="Of those, submitted by the budget's end, not by `submit`."
    )
    admitted: int | None = Field(default=None, description="Proposals admitted (proposer).")
    set_aside: int = Field(
        default=0,
        description="Proposer replies that wrote nothing before any file existed, dropped and "
        "asked again.",
    )

    @property
    def label(self) -> str:
        return f"{self.role} ({self.purpose})" if self.purpose else self.role


class GrpoGroups(BaseModel):
    """GRPO groups of one role's update, and how many had no reward variance (no gradient)."""

    role: Role
    groups: int
    without_reward_variance: int


def _purpose(attempt: Attempt) -> str:
    if attempt.role == "proposer":
        return ""
    return str(attempt.metadata.get("purpose") or "untagged")


def _order(activity: RoleActivity) -> tuple[int, int, str]:
    role = 0 if activity.role == "proposer" else 1
    rank = (
        PURPOSE_ORDER.index(activity.purpose)
        if activity.purpose in PURPOSE_ORDER
        else len(PURPOSE_ORDER)
    )
    return role, rank, activity.purpose


def role_activity(
    attempts: Iterable[Attempt], step_counts: Mapping[str, tuple[int, int]]
) -> list[RoleActivity]:
    """Per role and solver purpose; `step_counts` is RolloutStore.step_counts of these attempts.

    Attempts still running (no outcome) are left out: their numbers are not final.
    """
    grouped: dict[tuple[str, str], list[Attempt]] = defaultdict(list)
    for a in attempts:
        if a.outcome is not None:
            grouped[(a.role, _purpose(a))].append(a)
    out = []
    for (role, purpose), group in grouped.items():
        turns = with_call = tool_calls = attempts_with = 0
        for a in group:
            called, silent = step_counts.get(a.id, (0, 0))
            recorded = int(a.metadata.get("model_turns") or a.turns or 0)
            # Every step without a tool call is a turn, and tool calls took at least one more.
            n = max(recorded, silent + (1 if called else 0))
            turns += n
            with_call += min(called, max(0, n - silent))
            tool_calls += called
            attempts_with += called > 0
        n_attempts = len(group)
        proposer = role == "proposer"
        out.append(
            RoleActivity(
                role=role,  # pyright: ignore[reportArgumentType] - read from a Role column
                purpose=purpose,
                tools_offered=not proposer
                or any(a.metadata.get("arm", "terminal") == "terminal" for a in group),
                attempts=n_attempts,
                turns=turns,
                turns_with_tool_call=with_call,
                attempts_with_tool_call=attempts_with,
                tool_calls=tool_calls,
                turn_tool_call_rate=with_call / turns if turns else None,
                attempt_tool_call_rate=attempts_with / n_attempts,
                mean_tool_calls=tool_calls / n_attempts,
                prompt_tokens=sum(a.prompt_tokens for a in group),
                completion_tokens=sum(a.completion_tokens for a in group),
                context_exceeded=sum(CONTEXT_EXCEEDED in (a.error or "") for a in group),
                stop_reasons=dict(
                    Counter(str(a.metadata.get("stop_reason") or UNRECORDED) for a in group)
                ),
                outcomes=dict(Counter(str(a.outcome) for a in group)),
                # An admitted proposal's attempt is finished `solved` by admission (run_gate).
                submitted=sum(bool(a.metadata.get("submitted")) for a in group)
                if proposer
                else None,
                autosubmitted=sum(bool(a.metadata.get("autosubmitted")) for a in group),
                set_aside=sum(int(a.metadata.get("set_aside") or 0) for a in group),
                admitted=sum(a.outcome == "solved" for a in group) if proposer else None,
            )
        )
    return sorted(out, key=_order)


def grpo_groups(training: Mapping[str, Any]) -> list[GrpoGroups]:
    """From the round's training summary (graphs/flywheel/training.py: train_solver and
    train_proposer): the groups each update saw; empty when none was planned.

    A proposer group the plan dropped (all rewards equal, or a single proposal) counts as one
    without reward variance."""
    out = []
    if isinstance(training.get("groups"), int):
        out.append(
            GrpoGroups(
                role="solver",
                groups=training["groups"],
                without_reward_variance=int(training.get("groups_without_reward_variance") or 0),
            )
        )
    proposer = training.get("proposer")
    if isinstance(proposer, Mapping) and isinstance(proposer.get("groups"), int):
        dropped = len(proposer.get("groups_dropped") or [])
        out.append(
            GrpoGroups(
                role="proposer",
                groups=proposer["groups"] + dropped,
                without_reward_variance=dropped,
            )
        )
    return out


def activity_warnings(activity: Iterable[RoleActivity], grpo: Iterable[GrpoGroups]) -> list[str]:
    """Plain-language lines for what makes a round's outcome numbers meaningless."""
    lines = []
    for a in activity:
        if not a.attempts:
            continue
        if a.context_exceeded:
            lines.append(
                f"{a.label}: {a.context_exceeded} of {a.attempts} attempt(s) outgrew the model's "
                f"context window ({_per_turn(a)} tokens in / out per turn): the prompt leaves "
                "the model little or no room to answer"
            )
        if a.turns == 0:
            lines.append(
                f"{a.label}: {a.attempts} attempt(s) got no model reply at all "
                f"(stop reasons: {_counts(a.stop_reasons)})"
            )
        elif a.tools_offered and a.tool_calls == 0:
            what = "it never ran a command"
            if a.role == "proposer":
                what = (
                    "it wrote files only as <file> blocks in its replies"
                    if a.autosubmitted
                    else "it never wrote a task"
                )
            lines.append(
                f"{a.label} made 0 tool calls in {a.turns} turn{'s' * (a.turns != 1)} "
                f"({a.attempts} attempt(s), "
                f"stop reasons: {_counts(a.stop_reasons)}): {what}"
            )
        elif a.role == "proposer" and a.submitted == 0:  # it worked, and still never submitted
            lines.append(
                f"proposer submitted 0 of {a.attempts} proposal(s): the gate judged nothing"
            )
        if a.set_aside:
            lines.append(
                f"{a.label}: {a.set_aside} of {a.turns} turn(s) wrote nothing before the first "
                "file (prose, a malformed call or block): set aside and asked again; the "
                "proposer update trains each at -1"
            )
        if a.autosubmitted:
            lines.append(
                f"{a.label}: {a.autosubmitted} of {a.attempts} proposal(s) reached the gate by "
                "autosubmission at the budget's end: the model never called `submit`"
            )
    for g in grpo:
        if g.groups and g.without_reward_variance == g.groups:
            lines.append(
                f"{g.role} GRPO: all {g.groups} group(s) had no reward variance: "
                "the update carried no learning signal"
            )
    return lines


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "none"


def _per_turn(a: RoleActivity) -> str:
    if not a.turns:
        return "- / -"
    return f"{a.prompt_tokens / a.turns:.0f} / {a.completion_tokens / a.turns:.0f}"


def _submissions(a: RoleActivity) -> str:
    """By `submit` / autosubmitted / admitted: an autosubmission is no `submit` (and is trained
    at a lower reward, training/proposer/update.py), so the two are never one number."""
    if a.submitted is None:
        return "-"
    return f"{a.submitted - a.autosubmitted} / {a.autosubmitted} / {a.admitted}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def activity_markdown(activity: list[RoleActivity], grpo: list[GrpoGroups]) -> str:
    """The round report's "Agent behaviour" section (its warnings head the report)."""
    lines = ["## Agent behaviour", ""]
    if activity:
        lines += [
            "| role | attempts | turns | turns with a tool call | attempts with a tool call "
            "| tool calls per attempt | tokens in / out per turn | stop reasons "
            "| submitted by `submit` / autosubmitted / admitted |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for a in activity:
            offered = "" if a.tools_offered else " (no tools offered)"
            lines.append(
                f"| {a.label}{offered} | {a.attempts} | {a.turns} "
                f"| {a.turns_with_tool_call} ({_rate(a.turn_tool_call_rate)}) "
                f"| {a.attempts_with_tool_call} ({_rate(a.attempt_tool_call_rate)}) "
                f"| {'-' if a.mean_tool_calls is None else f'{a.mean_tool_calls:.2g}'} "
                f"| {_per_turn(a)} "
                f"| {_counts(a.stop_reasons)} "
                f"| {_submissions(a)} |"
            )
    else:
        lines.append("No finished attempt was recorded this round.")
    if grpo:
        lines += [""] + [
            f"- GRPO, {g.role}: {g.groups} group(s), {g.without_reward_variance} without reward "
            "variance"
            for g in grpo
        ]
    return "\n".join(lines) + "\n"
