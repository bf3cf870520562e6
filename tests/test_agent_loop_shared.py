"""Agent loops share one compiled graph (graphs/agent/loop.py: compiled once per name); each
loop's model, tools and budget are its own, even while many run at once on the same graph."""

from __future__ import annotations

import asyncio
import time

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from autoenvscaling.graphs.agent.loop import LoopBudget, build_agent_loop
from autoenvscaling.graphs.agent.scripted_model import load_scripted, register, reply, tool_call


def _tools_of(owner: int):
    @tool
    async def whoami() -> str:
        """Says which loop's tool ran."""
        await asyncio.sleep(0.01 * (owner % 3))  # interleave the loops' tool calls
        return f"tool of loop {owner}"

    return [whoami]


def _script(owner: int, calls: int):
    def answer(messages):
        done = sum(isinstance(m, ToolMessage) for m in messages)
        if done < calls:
            return reply(f"model of loop {owner}", tool_call("whoami"))
        return reply(f"loop {owner} done")

    return answer


async def test_loops_on_one_compiled_graph_keep_their_own_model_tools_and_budget():
    loops = []
    for owner in range(8):
        model = load_scripted(
            register(f"shared-loop-{owner}", _script(owner, calls=3)).split(":", 1)[1]
        )
        # Odd loops may make 2 model calls: their budget ends them before the script does.
        budget = LoopBudget(max_turns=2 if owner % 2 else 10)
        loops.append(build_agent_loop(model, _tools_of(owner), budget, name="shared-test"))
    assert len({id(loop.graph) for loop in loops}) == 1  # compiled once for the name

    states = await asyncio.gather(
        *(
            loop.ainvoke(
                {"messages": [HumanMessage(f"go {i}")], "started_at": time.monotonic()},
                {"recursion_limit": 50},
            )
            for i, loop in enumerate(loops)
        )
    )
    for owner, state in enumerate(states):
        outputs = [m.content for m in state["messages"] if isinstance(m, ToolMessage)]
        expected_calls = 2 if owner % 2 else 3
        assert outputs == [f"tool of loop {owner}"] * expected_calls, (owner, outputs)
        assert state["stop_reason"] == ("max_turns" if owner % 2 else "done")
        if not owner % 2:
            assert state["messages"][-1].content == f"loop {owner} done"
