"""One proposer attempt as a graph: episode -> gate -> revise -> episode ... or the end.

- `episode`: the agent loop until a stop tool (`submit`), the budget or an error; the terminal
  arm's reply without a tool call is answered with a reminder to submit. A one-reply arm's
  episode is one model call.
- `gate`: the full gate on the candidate: the validation graph (graphs/validation/builder.py) runs as
  this node's subgraph; a one-reply arm's files are written first (a reply that is not a task is
  rejected like a lint failure).
- `revise`: the gate's stage, reason and excerpt go back to the model, then the next episode.

The attempt's live parts (the agent loop, the candidate folder, the settings) are the run's
context (`EpisodeContext`), never state: the graph is run by `record.propose` inside the MCP
tools' lifetime and is never checkpointed (graphs/agent/nesting.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, Required, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Command

from ...prompts import load_prompt
from ...tools.files.rooted import RootedFs
from ...tools.files.safe_paths import PathRefusedError
from ...tools.gate import REWARD_VALIDATION_FAILED, Verdict, sealed
from ...tools.gate.gpu import scored_for_proposer
from ...tools.rollouts.transcripts import chat_messages
from ...tools.tasks.file_blocks import (
    ReplyFormatError,
    parse_file_blocks,
    read_file_blocks,
)
from ...tools.tasks.format import TaskFormatError, write_task
from ...tools.tasks.snapshot import content_hash
from ...tools.trials.verifier import default_to_separate
from ...training.chat_format import parse_reply
from ..agent.loop import AgentLoop, LoopBudget
from ..agent.nesting import non_durable
from ..validation.builder import ValidationInput
from ..validation.builder import graph as validation_graph
from .prompts import revision_prompt
from .settings import (
    GateRun,
    ProposalResult,
    ProposerSettings,
    SetAsideReply,
)

#: langgraph's END, typed as the literal the nodes' `Command[Literal[...]]` routes name.
END: Final = "__end__"


@dataclass(frozen=True)
class EpisodeContext:
    """What every node of one attempt shares: its settings, folder and agent loop (live)."""

    settings: ProposerSettings
    candidate: Path
    loop: AgentLoop  # the agent loop (graphs/agent/loop.py), built over the attempt's tools
    budget: LoopBudget

    @property
    def terminal(self) -> bool:
        return self.settings.arm == "terminal"


class AttemptState(TypedDict, total=False):
    messages: Required[list[AnyMessage]]  # the whole conversation: revisions keep the context
    result: Required[ProposalResult]
    revision: int
    tool_seconds: dict[str, float]


def _context(runtime: Runtime[EpisodeContext]) -> EpisodeContext:
    if runtime.context is None:
        raise TypeError("the proposer's attempt graph runs with an EpisodeContext (see propose())")
    return runtime.context


async def episode(
    state: AttemptState, runtime: Runtime[EpisodeContext]
) -> Command[Literal["gate", "__end__"]]:
    """The agent loop until a stop tool, the budget or an error; with the terminal arm, a reply
    without a tool call is answered with a reminder to submit (it still costs budget)."""
    ctx = _context(runtime)
    loop_state: dict[str, Any] = {
        "messages": state["messages"],
        "started_at": time.monotonic(),
        "turns": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
    }
    seconds = dict(state.get("tool_seconds", {}))
    set_aside: list[SetAsideReply] = []
    while True:
        # durability="exit": the loop keeps no checkpoints, and langgraph 1.2.24 fails a
        # checkpointer-less graph that inherits a parent's durability="sync" (the CLI's).
        loop_state = await ctx.loop.ainvoke(
            loop_state, {"recursion_limit": 4 * ctx.budget.max_turns + 10}, durability="exit"
        )
        seconds.update(loop_state.get("tool_seconds", {}))
        if not (ctx.terminal and loop_state.get("stop_reason") == "done"):
            break
        answer = _continuation(loop_state["messages"], ctx.candidate)  # writes its <file> blocks
        if _holds_files(ctx.candidate):
            loop_state["messages"] = [*loop_state["messages"], HumanMessage(answer)]
        else:
            # Nothing written yet, and this reply wrote nothing either (prose, a malformed call
            # or block): set aside, and the model asked again from the same point, a fresh
            # sample. Answered instead, the embedded model copies its reply to the budget's end
            # (measured: 16 identical replies in 18 turns; a bad call 9 times after each
            # explanation of it). The reply is kept aside for training, where it was served.
            *kept, dropped = loop_state["messages"]
            set_aside.append(SetAsideReply(at=len(kept), message=chat_messages([dropped])[0]))
            loop_state["messages"] = kept
        loop_state["stop_reason"] = None
    result = state["result"].model_copy(deep=True)
    result.turns += loop_state.get("turns", 0)
    result.prompt_tokens += loop_state.get("prompt_tokens", 0)
    result.completion_tokens += loop_state.get("completion_tokens", 0)
    result.set_aside += len(set_aside)
    result.set_aside_replies.extend(set_aside)
    stop_reason = result.stop_reason = loop_state.get("stop_reason")
    error = loop_state.get("error")
    update: dict[str, Any] = {"messages": list(loop_state["messages"]), "tool_seconds": seconds}
    if stop_reason == "error":
        result.outcome, result.reward, result.error = "error", None, error
        return Command(goto=END, update={**update, "result": result})
    if ctx.terminal and stop_reason in BUDGET_STOPS and ctx.settings.autosubmit:
        result.autosubmitted = _holds_files(ctx.candidate)  # what the folder holds goes to the gate
    if ctx.terminal and stop_reason != "submitted" and not result.autosubmitted:
        result.outcome = "timeout" if stop_reason == "time_budget" else "failed"
        result.reward = REWARD_VALIDATION_FAILED
        result.error = f"never submitted: stopped at {stop_reason}" + (
            f" ({error})" if error else ""  # e.g. the context was full
        )
        return Command(goto=END, update={**update, "result": result})
    result.submitted = True
    return Command(goto="gate", update={**update, "result": result})


async def gate(
    state: AttemptState, runtime: Runtime[EpisodeContext]
) -> Command[Literal["revise", "__end__"]]:
    """The full gate (the validation graph) on the submitted candidate."""
    ctx = _context(runtime)
    candidate = ctx.candidate
    problem = None if ctx.terminal else _write_reply(_last_reply(state["messages"]), candidate)
    if problem is not None:
        verdict = _format_verdict(candidate, problem)
    else:
        default_to_separate(candidate)  # a task that states no verifier mode: the separate one
        task = candidate.resolve()
        checked = content_hash(task) if task.is_dir() else None
        # Its own step limit: the attempt graph's (a few steps per revision) is inherited
        # otherwise, and the gate's stages alone outnumber it when no revision is allowed.
        out = await non_durable(validation_graph).ainvoke(
            ValidationInput(task=str(task)),
            {"recursion_limit": VALIDATION_STEPS},
            context=ctx.settings.gate,
            durability="exit",
        )
        verdict = scored_for_proposer(sealed(Verdict.model_validate(out["verdict"]), checked, task))
    revision = state.get("revision", 0)
    result = state["result"].model_copy(deep=True)
    result.verdict = verdict
    result.gates.append(
        GateRun(
            revision=revision,
            admitted=verdict.admitted,
            stage=verdict.stage,
            reason=verdict.reason,
            proposer_reward=verdict.proposer_reward,
        )
    )
    result.admitted, result.reward = verdict.admitted, verdict.proposer_reward
    if verdict.infrastructure_error:
        result.outcome, result.error = "error", verdict.reason
        return Command(goto=END, update={"result": result})
    result.outcome = "solved" if verdict.admitted else "failed"
    done = (
        verdict.admitted
        or ctx.settings.arm == "prompt_only"
        or revision >= ctx.settings.max_revisions
    )
    return Command(goto=END if done else "revise", update={"result": result})


#: Stops where the episode ran out of budget (not an error): the folder may be autosubmitted.
BUDGET_STOPS = ("max_turns", "max_tokens", "time_budget")


def _holds_files(candidate: Path) -> bool:
    return candidate.is_dir() and any(p.is_file() for p in candidate.rglob("*"))


def _continuation(messages: list[AnyMessage], candidate: Path) -> str:
    """The terminal arm's answer to a reply without a tool call. `<file>` blocks in it (the
    brief's format, which small models echo) are written to the folder as `write_file` writes
    them (same path checks), and the answer says so; any other reply gets the reminder."""
    text = reply.text if (reply := _last_reply(messages)) is not None else ""
    try:
        files = read_file_blocks(text)
    except ReplyFormatError:
        # A call the chat format could not read (small models leave quotes in a file's content
        # unescaped): say why no tool ran, and point at the block form that needs no escaping.
        if (error := parse_reply(text).error) is not None:
            return load_prompt("proposer_bad_tool_call").format(error=error)
        return load_prompt("proposer_continue")
    fs, written, refused = RootedFs(candidate), [], []
    for path, content in files.items():
        try:
            fs.write(path, content)
            written.append(path)
        except (PathRefusedError, OSError) as exc:
            refused.append(f"{path} ({type(exc).__name__})")
    note = f"; not written: {', '.join(refused)}" if refused else ""
    return load_prompt("proposer_files_written").format(files=", ".join(written) + note)


def revise(state: AttemptState, runtime: Runtime[EpisodeContext]) -> dict[str, Any]:
    """The gate's rejection (stage, reason, excerpt) back to the model; then the next episode."""
    settings = _context(runtime).settings
    revision = state.get("revision", 0) + 1
    result = state["result"].model_copy(deep=True)
    assert result.verdict is not None  # `gate` routes here only after a verdict
    result.revisions = revision
    prompt = revision_prompt(settings.arm, result.verdict, revision, settings.max_revisions)
    return {
        "messages": [*state["messages"], HumanMessage(prompt)],
        "result": result,
        "revision": revision,
    }


def build_attempt_graph(*, name: str = "proposer_attempt") -> Any:
    builder = StateGraph(AttemptState, context_schema=EpisodeContext)
    builder.add_node("episode", episode)
    builder.add_node("gate", gate)
    builder.add_node("revise", revise)
    builder.add_edge(START, "episode")
    builder.add_edge("revise", "episode")
    return builder.compile(name=name)


#: Steps the validation graph may take: one per stage and the verdict, with room to spare.
VALIDATION_STEPS = 25


def recursion_limit(settings: ProposerSettings) -> int:
    """Three steps per episode (episode, gate, revise), with room to spare."""
    return 3 * (settings.max_revisions + 1) + 5


# -- one-reply arms ----------------------------------------------------------------------------


def _format_verdict(candidate: Path, problem: str) -> Verdict:
    """A reply that is not a task folder: rejected like a lint failure, with the reason why."""
    return Verdict(
        task=str(candidate),
        task_name=candidate.name,
        admitted=False,
        stage="lint",
        reason=f"the reply could not be turned into task files: {problem}",
        proposer_reward=REWARD_VALIDATION_FAILED,
    )


def _write_reply(reply: AIMessage | None, candidate: Path) -> str | None:
    """Write a one-reply arm's files into `candidate`; the parse problem, if it is not a task."""
    text = reply.text if reply is not None else ""
    try:
        spec = parse_file_blocks(text)
    except ValueError as exc:  # ReplyFormatError, or a TaskSpec field the model got wrong
        return str(exc) if isinstance(exc, ReplyFormatError) else f"{type(exc).__name__}: {exc}"
    try:
        write_task(spec, candidate, overwrite=True)
    except TaskFormatError:
        pass  # the files are written; the gate's lint stage names the problem
    return None


def _last_reply(messages: list[AnyMessage]) -> AIMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)


attempt_graph = build_attempt_graph()
"""The compiled attempt graph: the flywheel's `propose_one` and the proposer graph's run it."""
