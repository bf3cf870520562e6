"""The solver role as a Harbor agent: a terminal agent that works inside a real Harbor trial.

Harbor builds the sandbox, hides the tests, runs the verifier and reads the reward; the agent only
sees the instruction and an MCP terminal in the trial's sandbox (attached to the live sandbox on
our engines; over the environment's `exec` on any other Harbor type), and records its steps (graphs/solver/attempt.py runs the trial and rewards the attempt). Harbor loads it by import
path (`SOLVER_AGENT`; the gate's config and past trial configs name it too), so it stays here.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any, override

from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from langchain_core.messages import HumanMessage, SystemMessage

from ...mcp_servers.terminal import (
    ShellOpener,
    attached_shells,
    exec_shells,
    pooled_terminal_server,
)
from ...prompts import load_prompt
from ...tools.agents.prompt_fit import prompt_tokens, reply_cap
from ...tools.agents.solver_interface import first_messages, openai_tools, render_mcp_result
from ...tools.rollouts.kept import kept_store
from ...tools.rollouts.models import new_attempt_id
from ...tools.rollouts.store import RolloutStore
from ...tools.tasks.domains import needs_desktop
from ...tools.trials.script_agent import PlainAgent
from ..agent.loop import build_agent_loop, steps_from_messages
from ..agent.mcp_tools import open_mcp_tools
from ..models import ModelConfig, load_chat_model
from .attempt import SolverSettings, record_start


class SolverAgent(PlainAgent):
    """Harbor agent: the LangGraph tool loop over an MCP terminal attached to the trial's sandbox."""

    def __init__(self, *args: Any, settings: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = SolverSettings.model_validate(settings or {})

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-solver"

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        s = self.settings
        opener = terminal_shells(environment)
        started = time.monotonic()
        task_dir = Path(str(getattr(environment, "environment_dir", ""))).parent
        desktop = s.desktop_tools
        if desktop is None:
            desktop = needs_desktop(task_dir)
        # The one solver interface (tools/agents/solver_interface.py): GRPO episodes start the same way.
        # Only the cheat agent (anti_cheat) swaps the system prompt.
        system, user = first_messages(instruction)
        if s.system_prompt != "solver":
            system = {"content": load_prompt(s.system_prompt)}
        messages = [SystemMessage(system["content"]), HumanMessage(user["content"])]
        model = solver_model_for(s.model, system["content"], user["content"], desktop=desktop)
        # A pooled server: building one per episode was ~5% of its CPU (mcp_servers/terminal.py).
        with pooled_terminal_server(opener, desktop=desktop) as server:
            async with open_mcp_tools({"terminal": server}) as tools:
                loop = build_agent_loop(
                    load_chat_model(model),
                    tools,
                    s.budget,
                    name="solver",
                    tool_choice=s.model.tool_choice,
                    schemas=openai_tools(desktop=desktop),
                    present=functools.partial(render_mcp_result, cap=s.tool_output_chars),
                )
                state = await loop.ainvoke(
                    {"messages": messages, "started_at": time.monotonic()},
                    {"recursion_limit": 4 * s.budget.max_turns + 10},
                    durability="exit",  # no checkpointer; see graphs/proposer/episode.py
                )
        steps = steps_from_messages(state["messages"], state.get("tool_seconds", {}))
        tool_steps = sum(1 for step in steps if step.tool_name)
        if store_path := s.store_path:
            # A trial someone else runs (the gate's calibration) has no attempt id: a fresh one,
            # reported back in the trial's metadata so the caller can give the attempt its reward.
            where = Path(str(getattr(environment, "environment_dir", ""))).parent.name
            update = {"attempt_id": s.attempt_id or new_attempt_id(), "task_id": s.task_id or where}
            s = s.model_copy(update=update)
            # Known here for every attempt, the gate's calibration trials included (their rows
            # are finished elsewhere): the round report counts them.
            turns = {"stop_reason": state.get("stop_reason"), "model_turns": state.get("turns", 0)}
            meta = {**s.tags, **turns}

            def record(store: RolloutStore, s: SolverSettings = s) -> None:
                store.add_steps(record_start(store, s, meta), steps)

            # The process's kept store, off the event loop (tools/rollouts/kept.py).
            await kept_store(store_path).call(record)
        context.n_input_tokens = state.get("prompt_tokens", 0)
        context.n_output_tokens = state.get("completion_tokens", 0)
        context.metadata = {
            **(context.metadata or {}),
            "attempt_id": s.attempt_id,
            "steps": tool_steps,
            "turns": state.get("turns", 0),
            "stop_reason": state.get("stop_reason"),
            "error": state.get("error"),
            "prompt_tokens": state.get("prompt_tokens", 0),
            "completion_tokens": state.get("completion_tokens", 0),
            "model_retries": state.get("model_retries", 0),
            "retry_errors": state.get("retry_errors", []),
            "agent_seconds": round(time.monotonic() - started, 3),
        }


def terminal_shells(environment: BaseEnvironment) -> ShellOpener:
    """The terminal's shells in the trial's sandbox, as the task's agent user (`[agent] user`:
    Harbor's trial sets it as the environment's default user for the agent's phase), like a GRPO
    episode; the image's user otherwise. Our engines attach a live shell (the faster path);
    any other Harbor environment type runs each command through its `exec` (same behaviour)."""
    ref = getattr(environment, "sandbox_ref", None)  # our SandboxEnvironment's
    if ref is None:
        return exec_shells(environment)  # Harbor's exec applies the default user itself
    if environment.default_user is not None:
        ref = ref.model_copy(update={"user": str(environment.default_user)})
    return attached_shells(ref)


def solver_model_for(
    model: ModelConfig, system: str, user: str, *, desktop: bool = False
) -> ModelConfig:
    """The solver's model with its reply cap within what a known context window leaves after
    the first prompt (~1.1k tokens with the tool schemas). The instruction is the task's and is
    never trimmed; one too long for the window leaves a 1-token reply and the attempt fails as
    the model's, not as an infrastructure error a task could provoke on purpose."""
    if model.context_window is None:
        return model
    needed = prompt_tokens([system, user], openai_tools(desktop=desktop))
    cap = reply_cap(needed, model.max_tokens, model.context_window)
    return model if cap == model.max_tokens else model.model_copy(update={"max_tokens": cap})
