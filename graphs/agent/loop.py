"""The tool-calling loop both roles run: model -> tools -> model ..., with budgets and retries.

A small LangGraph graph rather than a prebuilt agent because the loop must stop on the budgets
the flywheel sets (turns, tokens, wall time), time every tool call for the rollout store, turn a
failed model call into an `error` outcome after retries, and end when a stop tool (`submit`) runs.
"""

from __future__ import annotations

import asyncio
import functools
import json
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal, Required, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langgraph.graph import START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import BaseModel, Field

from ...tools.report.activity import CONTEXT_EXCEEDED
from ...tools.rollouts.models import Step
from ...tools.rollouts.transcripts import content_text
from ...training.serving.supervision import PolicyServerCrashed, crash_during

StopReason = Literal["done", "submitted", "max_turns", "max_tokens", "time_budget", "error"]


class LoopBudget(BaseModel):
    # No default here: each role has its one (SOLVER_MAX_TURNS, PROPOSER_MAX_TURNS).
    max_turns: int = Field(description="Model calls per attempt")
    max_total_tokens: int = Field(
        default=120_000, description="Prompt + completion tokens per attempt"
    )
    time_budget_sec: float = Field(default=900, description="Wall time per attempt")
    max_retries: int = Field(
        default=2, description="Retries of a failed model call (exponential backoff)"
    )
    retry_base_sec: float = Field(
        default=0.5, description="First backoff; doubles per retry (+ jitter)"
    )
    retry_max_sec: float = Field(default=8.0, description="Cap on one backoff")


#: langgraph's END, typed as the literal the nodes' `Command[Literal[...]]` routes name.
END: Final = "__end__"


class LoopState(TypedDict, total=False):
    messages: Required[Annotated[list[AnyMessage], add_messages]]
    turns: int
    prompt_tokens: int
    completion_tokens: int
    started_at: float
    stop_reason: StopReason | None
    error: str | None
    tool_seconds: dict[str, float]
    model_retries: int  # failed model calls that were retried (each one recorded here)
    retry_errors: list[str]


def _context_full(exc: Exception) -> bool:
    text = str(exc).lower()
    return "maximum context length" in text or "context_length_exceeded" in text


def _over_budget(state: LoopState, budget: LoopBudget) -> StopReason | None:
    if state.get("turns", 0) >= budget.max_turns:
        return "max_turns"
    if state.get("prompt_tokens", 0) + state.get("completion_tokens", 0) >= budget.max_total_tokens:
        return "max_tokens"
    if time.monotonic() - state.get("started_at", time.monotonic()) >= budget.time_budget_sec:
        return "time_budget"
    return None


@dataclass(frozen=True)
class _Episode:
    """One loop's live parts, handed to the shared compiled graph as its runtime context."""

    bound: Runnable[Any, AIMessage]  # the model with the tools bound
    by_name: dict[str, BaseTool]
    budget: LoopBudget
    stop_tools: frozenset[str]
    present: Callable[[str], str] | None
    endpoint: str | None  # an OpenAI-compatible server's URL (for crash attribution)


@dataclass(frozen=True)
class AgentLoop:
    """An agent loop over one model and tool set: the graph compiled once per name (compiling
    was ~7% of an episode's CPU at 64 in flight), run with this loop's parts as its context."""

    graph: Any
    episode: _Episode

    async def ainvoke(
        self, state: Mapping[str, Any], config: Any = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await self.graph.ainvoke(state, config, context=self.episode, **kwargs)


def build_agent_loop(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    budget: LoopBudget,
    *,
    stop_tools: frozenset[str] = frozenset({"submit"}),
    name: str = "agent_loop",
    tool_choice: str | None = None,
    schemas: Sequence[dict[str, Any]] | None = None,
    present: Callable[[str], str] | None = None,
) -> AgentLoop:
    """`schemas` (OpenAI tool dicts) are what the model is shown instead of the tools' own
    schemas, and `present` turns a tool's text result into what the model reads: together they
    let a role show one fixed interface (tools/agents/solver_interface.py) whatever serves the tools."""
    extra = {"tool_choice": tool_choice} if tool_choice else {}
    shown = list(schemas) if schemas is not None else list(tools)
    episode = _Episode(
        bound=model.bind_tools(shown, **extra) if shown else model,
        by_name={tool.name: tool for tool in tools},
        budget=budget,
        stop_tools=stop_tools,
        present=present,
        endpoint=getattr(model, "openai_api_base", None),
    )
    return AgentLoop(_compiled_loop(name), episode)


async def _call_model(ep: _Episode, messages: list[AnyMessage], retried: list[str]) -> AIMessage:
    """The model call with bounded retries and exponential backoff; each retry is recorded in
    `retried` (a full context window is the episode's limit, never retried; nor is a call its
    policy server crashed under: that request may be what killed it)."""
    budget = ep.budget
    for attempt in range(budget.max_retries + 1):
        started = time.monotonic()
        try:
            return await ep.bound.ainvoke(messages)
        except Exception as exc:
            crash = (
                await asyncio.to_thread(crash_during, ep.endpoint, started, exc)
                if ep.endpoint
                else None
            )
            if crash is not None:
                raise PolicyServerCrashed(crash) from exc
            if _context_full(exc) or attempt == budget.max_retries:
                raise
            retried.append(f"{type(exc).__name__}: {exc}"[:300])
            delay = min(budget.retry_max_sec, budget.retry_base_sec * 2**attempt)
            await asyncio.sleep(delay * (0.5 + random.random() / 2))
    raise AssertionError("unreachable")


async def _agent(
    state: LoopState, runtime: Runtime[_Episode]
) -> Command[Literal["tools", "__end__"]]:
    ep = runtime.context
    budget = ep.budget
    if reason := _over_budget(state, budget):
        return Command(goto=END, update={"stop_reason": reason})
    retried: list[str] = []
    recorded = {
        "model_retries": state.get("model_retries", 0),
        "retry_errors": list(state.get("retry_errors", [])),
    }
    try:
        reply: AIMessage = await _call_model(ep, state["messages"], retried)
    except Exception as exc:  # noqa: BLE001 - after retries: recorded as an error outcome, never raised
        recorded["model_retries"] += len(retried)
        recorded["retry_errors"] = (recorded["retry_errors"] + retried)[-10:]
        if _context_full(exc):
            # The conversation outgrew the model's window: the episode's budget, not a fault.
            return Command(
                goto=END,
                update={
                    **recorded,
                    "stop_reason": "max_tokens",
                    "error": f"the conversation {CONTEXT_EXCEEDED}: {exc}"[:500],
                },
            )
        failed = (
            "the policy server crashed during the model call"
            if isinstance(exc, PolicyServerCrashed)
            else f"model call failed after {budget.max_retries + 1} tries"
        )
        return Command(
            goto=END,
            update={
                **recorded,
                "stop_reason": "error",  # infrastructure (tools/trials/faults.py)
                "error": f"{failed}: {type(exc).__name__}: {exc}",
            },
        )
    recorded["model_retries"] += len(retried)
    recorded["retry_errors"] = (recorded["retry_errors"] + retried)[-10:]
    usage = reply.usage_metadata or {}
    update: dict[str, Any] = {
        **recorded,
        "messages": [reply],
        "turns": state.get("turns", 0) + 1,
        "prompt_tokens": state.get("prompt_tokens", 0) + usage.get("input_tokens", 0),
        "completion_tokens": state.get("completion_tokens", 0) + usage.get("output_tokens", 0),
    }
    if not reply.tool_calls:
        return Command(goto=END, update={**update, "stop_reason": "done"})
    return Command(goto="tools", update=update)


async def _run_tools(
    state: LoopState, runtime: Runtime[_Episode]
) -> Command[Literal["agent", "__end__"]]:
    ep = runtime.context
    last = state["messages"][-1]
    assert isinstance(last, AIMessage)
    results: list[ToolMessage] = []
    seconds = dict(state.get("tool_seconds", {}))
    for call in last.tool_calls:
        call_id = call["id"] or ""  # OpenAI-style servers always send one
        started = time.monotonic()
        tool = ep.by_name.get(call["name"])
        if tool is None:
            message = ToolMessage(
                content=f"unknown tool {call['name']!r}; available: {', '.join(sorted(ep.by_name))}",
                tool_call_id=call["id"],
                name=call["name"],
                status="error",
            )
        else:
            try:
                message = await tool.ainvoke({**call, "type": "tool_call"})
            except Exception as exc:  # noqa: BLE001 - a tool's failure is the model's feedback, not a crash
                message = ToolMessage(
                    content=f"{type(exc).__name__}: {exc}",
                    tool_call_id=call["id"],
                    name=call["name"],
                    status="error",
                )
        seconds[call_id] = round(time.monotonic() - started, 4)
        # Plain text: several OpenAI-compatible servers (llama.cpp among them) reject the
        # content-block lists MCP tools return.
        if not isinstance(message.content, str):
            message = message.model_copy(update={"content": content_text(message.content)})
        if ep.present is not None:
            message = message.model_copy(update={"content": ep.present(str(message.content))})
        results.append(message)
    update = {"messages": results, "tool_seconds": seconds}
    if any(call["name"] in ep.stop_tools for call in last.tool_calls):
        return Command(goto=END, update={**update, "stop_reason": "submitted"})
    return Command(goto="agent", update=update)


@functools.cache
def _compiled_loop(name: str) -> Any:
    """The loop's graph, compiled once per name (the name tracing and Studio show)."""
    builder = StateGraph(LoopState, context_schema=_Episode)
    builder.add_node("agent", _agent)
    builder.add_node("tools", _run_tools)
    builder.add_edge(START, "agent")
    # Never durable, even inside a checkpointed graph (the flywheel): an episode's tools act on a
    # sandbox that dies with the process, so a resumed loop would replay a conversation about a
    # machine that is gone; and concurrent loops in one node would share a checkpoint namespace.
    return builder.compile(name=name, checkpointer=False)


_EXIT_CODE = re.compile(r"\[exit code (-?\d+)\]")


def _exit_code(output: str) -> int | None:
    """From a TerminalResult JSON, or from the `[exit code N]` line of the interface's text."""
    try:
        data = json.loads(output)
    except (json.JSONDecodeError, TypeError):
        found = _EXIT_CODE.findall(output[-400:]) if isinstance(output, str) else []
        return int(found[-1]) if found else None
    code = data.get("exit_code") if isinstance(data, dict) else None
    return code if isinstance(code, int) else None


def steps_from_messages(messages: Sequence[BaseMessage], seconds: dict[str, float]) -> list[Step]:
    """One rollout step per tool call (plus a final step for a closing message without one)."""
    outputs = {m.tool_call_id: m for m in messages if isinstance(m, ToolMessage)}
    steps: list[Step] = []
    for message in messages:
        if not isinstance(message, AIMessage):
            continue
        text = content_text(message.content) or None
        if not message.tool_calls:
            steps.append(Step(index=len(steps), message=text))
            continue
        for i, call in enumerate(message.tool_calls):
            out = outputs.get(call["id"] or "")
            output = content_text(out.content) if out else None
            steps.append(
                Step(
                    index=len(steps),
                    message=text if i == 0 else None,
                    tool_name=call["name"],
                    tool_args=call["args"],
                    tool_output=output,
                    output_bytes=len(output.encode()) if output is not None else None,
                    exit_code=_exit_code(output) if output else None,
                    duration_sec=seconds.get(call["id"] or ""),
                )
            )
    return steps
