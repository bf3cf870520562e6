"""One proposer attempt, run and recorded: `propose` opens the attempt's tools and first prompt,
runs the attempt graph (graphs/proposer/episode.py) and writes the rollout and its transcript."""

from __future__ import annotations

import shutil
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ...tools.agents.brief import ProposerBrief
from ...tools.rollouts.models import Attempt, new_attempt_id, stable_attempt_id
from ...tools.rollouts.store import RolloutStore
from ...tools.rollouts.transcripts import Transcript, chat_messages, save_transcript
from ...tools.tasks.format import TaskFormatError, load_task
from ...tools.tasks.task_files import written_task_files
from ..agent.loop import build_agent_loop, steps_from_messages
from ..agent.nesting import non_durable
from ..models import load_chat_model
from .episode import (
    AttemptState,
    EpisodeContext,
    attempt_graph,
    recursion_limit,
)
from .prompts import FittedPrompt, fit_first_prompt
from .settings import ProposalResult, ProposerSettings
from .workspace import proposer_tools


def attempt_id_for(settings: ProposerSettings, index: int) -> str:
    if settings.attempt_id:
        return settings.attempt_id
    if not settings.run_id:
        return new_attempt_id()
    return stable_attempt_id(
        settings.run_id,
        settings.round,
        "proposer",
        settings.arm,
        settings.solver_feedback,
        settings.policy_version,
        index,
    )


class _Conversation:
    """What the attempt leaves behind, whatever happened: its messages, tool timings, the
    first prompt as fitted and the result as of the last finished step."""

    def __init__(self) -> None:
        self.messages: list[AnyMessage] = []
        self.tool_seconds: dict[str, float] = {}
        self.fitted: FittedPrompt | None = None
        self.result: ProposalResult | None = None


async def propose(
    brief: ProposerBrief,
    settings: ProposerSettings,
    *,
    out_dir: Path | str,
    index: int = 0,
    graph: Any = None,
) -> ProposalResult:
    """One proposer attempt: write a task into a fresh candidate folder under `out_dir`, submit
    it, revise after rejections; recorded as a rollout. Never raises: failures are outcomes.

    `graph`: the compiled attempt graph to run (default: `episode.attempt_graph`); it runs
    without checkpoints (graphs/agent/nesting.py)."""
    started = time.monotonic()
    attempt_id = attempt_id_for(settings, index)
    candidate = Path(out_dir).resolve() / f"cand-{attempt_id[:12]}"
    if not settings.solver_feedback:
        brief = brief.without_feedback()
    result = ProposalResult(
        attempt_id=attempt_id,
        candidate=str(candidate),
        arm=settings.arm,
        solver_feedback=settings.solver_feedback,
        reward=None,
        outcome="error",
    )
    started_at = datetime.now(UTC)
    conversation = _Conversation()
    schemas: list[dict[str, Any]] = []
    try:
        shutil.rmtree(candidate, ignore_errors=True)  # a resumed attempt starts clean
        candidate.mkdir(parents=True)
        if settings.arm == "terminal":
            async with proposer_tools(settings, candidate) as tools:
                schemas = [convert_to_openai_tool(tool) for tool in tools]
                result = await _run(
                    graph, brief, settings, candidate, tools, schemas, conversation, result
                )
        else:
            result = await _run(graph, brief, settings, candidate, [], [], conversation, result)
    except Exception as exc:  # noqa: BLE001 - an attempt's failure is its outcome, not a crash
        result = conversation.result or result  # what the finished steps counted
        result.outcome, result.reward = "error", None
        result.error = f"{type(exc).__name__}: {exc}"
    steps = steps_from_messages(conversation.messages, conversation.tool_seconds)
    result.tool_calls = sum(1 for s in steps if s.tool_name)
    result.duration_sec = round(time.monotonic() - started, 3)
    if settings.store_path:
        try:
            with RolloutStore(settings.store_path) as store:
                store.record_attempt(
                    _attempt_row(settings, result, index, started_at, conversation.fitted), steps
                )
            # The whole conversation (brief, revisions) for SFT export and proposer training.
            save_transcript(
                settings.store_path,
                Transcript(
                    attempt_id=result.attempt_id,
                    messages=chat_messages(conversation.messages),
                    tools=schemas,
                ),
            )
        except Exception as exc:  # noqa: BLE001 - the result still reaches the caller
            result.error = f"{result.error or ''}; not recorded: {type(exc).__name__}: {exc}"
    return result


async def _run(
    graph: Any,
    brief: ProposerBrief,
    settings: ProposerSettings,
    candidate: Path,
    tools: list[BaseTool],
    schemas: list[dict[str, Any]],
    conversation: _Conversation,
    result: ProposalResult,
) -> ProposalResult:
    """Fit the first prompt (the tool schemas count: they are sent with every call; raises
    ContextWindowError before any call), then run the attempt graph from it."""
    fitted = fit_first_prompt(
        brief,
        settings.arm,
        settings.gate.band,
        settings.model,
        schemas,
        compact=settings.compact_prompt,
    )
    conversation.messages = [SystemMessage(fitted.system), HumanMessage(fitted.brief)]
    conversation.fitted = fitted
    settings = _fitted(settings, fitted)
    budget = (
        settings.budget
        if settings.arm == "terminal"
        else settings.budget.model_copy(update={"max_turns": 1})
    )
    loop = build_agent_loop(
        load_chat_model(settings.model),
        tools,
        budget,
        name="proposer",
        tool_choice=settings.model.tool_choice,
    )
    state: AttemptState = {"messages": conversation.messages, "result": result, "revision": 0}
    context = EpisodeContext(settings=settings, candidate=candidate, loop=loop, budget=budget)
    # The state after each node, so a crash midway still records what was said and counted.
    async for values in non_durable(graph or attempt_graph).astream(
        state,
        {"recursion_limit": recursion_limit(settings)},
        context=context,
        stream_mode="values",
        durability="exit",
    ):
        state = values
        conversation.messages = list(state["messages"])
        conversation.tool_seconds = dict(state.get("tool_seconds", {}))
        conversation.result = ProposalResult.model_validate(state["result"])
    return ProposalResult.model_validate(state["result"])


def _fitted(settings: ProposerSettings, fitted: FittedPrompt) -> ProposerSettings:
    """The settings with the reply cap that the fitted prompt leaves room for."""
    if fitted.max_tokens == settings.model.max_tokens:
        return settings
    model = settings.model.model_copy(update={"max_tokens": fitted.max_tokens})
    return settings.model_copy(update={"model": model})


def _attempt_row(
    settings: ProposerSettings,
    result: ProposalResult,
    index: int,
    started_at: datetime,
    fit: FittedPrompt | None = None,
) -> Attempt:
    """The attempt as one row, written once at the end (its category is only known then)."""
    try:
        category = load_task(result.candidate).category or ""
    except TaskFormatError:
        category = ""
    return Attempt(
        id=result.attempt_id,
        run_id=settings.run_id,
        round=settings.round,
        role="proposer",
        task_id=Path(result.candidate).name,
        category=category,
        policy_version=settings.policy_version,
        reward=result.reward,
        outcome=result.outcome,
        turns=result.turns,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        duration_sec=result.duration_sec,
        error=result.error,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        metadata={
            "arm": result.arm,
            "solver_feedback": result.solver_feedback,
            "index": index,
            "candidate": result.candidate,
            "revisions": result.revisions,
            "submitted": result.submitted,
            "autosubmitted": result.autosubmitted,
            "set_aside": result.set_aside,
            # Each dropped reply and the prompt index it answered: proposer training scores it.
            "set_aside_replies": [r.model_dump() for r in result.set_aside_replies],
            "stop_reason": result.stop_reason,
            "admitted": result.admitted,
            "tool_calls": result.tool_calls,
            "stage": result.verdict.stage if result.verdict else None,
            "reason": result.verdict.reason if result.verdict else None,
            # Which of a task's five files it wrote (the graded reward's measure below lint).
            "task_files": written_task_files(result.candidate),
            "gates": [g.model_dump() for g in result.gates],
            "model": settings.model.model,
            # What proposer training scores logprobs at (training/proposer/update.py).
            "temperature": settings.model.temperature,
            "prompt_fit": fit.model_dump(exclude={"system", "brief"}) if fit else None,
        },
    )
