"""An agent loop run inside a checkpointed graph is never checkpointed itself.

Its tools act on a sandbox that dies with the process, so a resumed loop could only replay a
conversation about a machine that is gone; and concurrent loops in one node would share the
node's checkpoint namespaces (a later one would start from an earlier one's conversation).
"""

from __future__ import annotations

import asyncio
import time
from typing import TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph

from autoenvscaling.graphs.agent.loop import LoopBudget, build_agent_loop
from autoenvscaling.graphs.agent.scripted_model import load_scripted, register


class Parent(TypedDict, total=False):
    seen: list[int]


def _first_turns_only(messages):
    """Says how many model replies the conversation already holds: 0 in a fresh episode."""
    return AIMessage(content=str(sum(isinstance(m, AIMessage) for m in messages)))


async def _episodes(_: Parent) -> Parent:
    model = load_scripted(register("loop-durability", _first_turns_only).split(":", 1)[1])

    async def one(i: int) -> int:
        loop = build_agent_loop(model, [], LoopBudget(max_turns=3))
        state = await loop.ainvoke(
            {"messages": [HumanMessage(f"episode {i}")], "started_at": time.monotonic()}
        )
        return int(state["messages"][-1].content)

    return {"seen": list(await asyncio.gather(*(one(i) for i in range(4))))}


def test_concurrent_loops_in_a_checkpointed_node_start_fresh_and_write_no_checkpoints():
    saver = InMemorySaver()
    builder = StateGraph(Parent)
    builder.add_node("episodes", _episodes)
    builder.add_edge(START, "episodes")
    graph = builder.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}

    for _ in range(2):  # the second invocation is what a resumed run does
        out = asyncio.run(graph.ainvoke({}, config))
        # Every episode's first model call sees no earlier reply from another episode.
        assert out["seen"] == [0, 0, 0, 0]

    namespaces = {c.config["configurable"]["checkpoint_ns"] for c in saver.list(config)}
    assert namespaces == {""}, f"agent loops wrote checkpoints under {namespaces - {''}}"
