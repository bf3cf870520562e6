"""What one proposer attempt is given (`ProposerSettings`) and what it returns (`ProposalResult`),
and the gate a proposer faces (`gate_config`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ...tools.agents.solver_interface import SOLVER_MAX_TURNS
from ...tools.gate import GateConfig, Verdict
from ...tools.rollouts.models import Outcome
from ...tools.sandbox import SandboxLimits
from ..agent.loop import LoopBudget
from ..config import (
    PROPOSER_MAX_TOTAL_TOKENS,
    PROPOSER_MAX_TURNS,
    PROPOSER_TIME_BUDGET_SEC,
)
from ..models import ModelConfig
from ..solver.attempt import SOLVER_AGENT, SolverSettings

Arm = Literal["terminal", "error_feedback", "prompt_only"]
ARMS: tuple[Arm, ...] = ("terminal", "error_feedback", "prompt_only")
TASK_MOUNT = "/workspace/task"
"""Where the candidate folder appears inside the proposer's workspace sandbox."""


def proposer_budget(
    max_turns: int = PROPOSER_MAX_TURNS, time_budget_sec: float = PROPOSER_TIME_BUDGET_SEC
) -> LoopBudget:
    """A proposer episode's budget: the proposer's defaults, the turns and time a caller sets."""
    return LoopBudget(
        max_turns=max_turns,
        max_total_tokens=PROPOSER_MAX_TOTAL_TOKENS,
        time_budget_sec=time_budget_sec,
    )


class ProposerSettings(BaseModel):
    """Everything one proposer attempt needs."""

    model: ModelConfig = Field(
        default_factory=lambda: ModelConfig(max_tokens=8192),
        description="The proposer's model; one-reply arms need room for a whole task per reply.",
    )
    arm: Arm = "terminal"
    solver_feedback: bool = Field(
        default=True, description="False: no rollout evidence in the brief."
    )
    budget: LoopBudget = Field(
        default_factory=lambda: proposer_budget(),
        description="Per episode (the first submission and each revision).",
    )
    max_revisions: int = Field(default=2, ge=0, description="Revisions after a rejection.")
    compact_prompt: bool = Field(
        default=False,
        description="The compact system prompt (terminal arm) from the start, and only the tools "
        "it names (COMPACT_TOOLS): each schema costs context on every call.",
    )
    desktop_tools: bool = Field(
        default=True,
        description="The terminal's desktop tools too (screenshot, key, type_text, click on the "
        "workspace's X display), to try a computer-use task's app; never with compact_prompt.",
    )
    autosubmit: bool = Field(
        default=True,
        description="When an episode's budget ends with files in the task folder, submit them "
        "(SWE-agent's autosubmission); False: the attempt ends unsubmitted.",
    )
    gate: GateConfig = Field(
        default_factory=GateConfig,
        description="The full gate after submit; `check` runs the same minus calibrate. "
        "calibrate runs only when gate.solver is set.",
    )
    store_path: str | None = Field(default=None, description="Rollout store; None records nothing")
    run_id: str = ""
    round: int = 0
    policy_version: str = "base"
    attempt_id: str | None = None
    workspace_limits: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(memory_mb=2048, pids=512)
    )


class GateRun(BaseModel):
    """One verdict of the attempt, compact (the last one is in `ProposalResult.verdict`)."""

    revision: int
    admitted: bool
    stage: str | None
    reason: str
    proposer_reward: float | None


class SetAsideReply(BaseModel):
    """A reply dropped before the first file: what it said and where in the conversation it was
    served, so proposer training sees it (training/proposer/update.py) as the policy wrote it."""

    at: int = Field(ge=0, description="Its index in the attempt's messages: the prompt it saw.")
    message: dict[str, Any] = Field(description="The reply as a chat-template message.")


class ProposalResult(BaseModel):
    attempt_id: str
    candidate: str = Field(description="The candidate task folder.")
    arm: Arm
    solver_feedback: bool
    admitted: bool = False
    reward: float | None = Field(description="The gate's proposer reward; None on an error.")
    outcome: Outcome
    revisions: int = Field(default=0, description="Revisions used after the first rejection.")
    verdict: Verdict | None = Field(default=None, description="The last full-gate verdict.")
    gates: list[GateRun] = Field(default_factory=list)
    submitted: bool = False
    autosubmitted: bool = Field(
        default=False, description="Submitted by the budget's end, not by the model's `submit`."
    )
    stop_reason: str | None = None
    error: str | None = None
    turns: int = 0
    set_aside: int = Field(
        default=0,
        description="Replies that wrote nothing (no tool call ran, no file block was written) "
        "while the folder held no file: dropped and asked again (they count as turns).",
    )
    set_aside_replies: list[SetAsideReply] = Field(
        default_factory=list, description="Those replies, for the proposer's training episode."
    )
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_sec: float = 0.0


def gate_config(
    *,
    backend: str = "podman",
    pool_dir: Path | str | None = None,
    solver: ModelConfig | None = None,
    solver_max_turns: int = SOLVER_MAX_TURNS,
    tool_output_chars: int | None = None,
    band: tuple[float, float] = (0.25, 0.75),
    **more: Any,
) -> GateConfig:
    """The gate a proposer faces; `solver` (a model) turns on calibration with our solver agent."""

    kwargs: dict[str, Any] = {
        "solver_agent": SOLVER_AGENT,
        "backend": backend,
        "band": band,
        "pool_dir": Path(pool_dir) if pool_dir else None,
        **more,
    }
    if solver is not None:
        settings = SolverSettings(model=solver, budget=LoopBudget(max_turns=solver_max_turns))
        if tool_output_chars is not None:
            settings.tool_output_chars = tool_output_chars
        kwargs |= {
            "solver": SOLVER_AGENT,
            "solver_kwargs": {"settings": settings.model_dump(mode="json")},
        }
    return GateConfig(**kwargs)
