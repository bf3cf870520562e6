"""The agent loop (compiled without a checkpointer) runs inside a graph streamed with
durability="sync", as `autoenvscaling run` streams the flywheel: langgraph 1.2.24 fails such a
child that inherits "sync" (AttributeError: '_put_checkpoint_fut'), so every proposer, solver and
admission of a CLI run errored at once. The callers pass durability="exit"; this keeps them so."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.proposer.record import propose
from autoenvscaling.graphs.proposer.settings import ProposerSettings
from autoenvscaling.tools.agents.brief import ProposerBrief

pytestmark = pytest.mark.timeout(60)


class _State(TypedDict, total=False):
    result: dict[str, Any]


async def test_a_proposer_episode_runs_under_a_sync_durable_parent(tmp_path: Path) -> None:
    name = register("durability-sync-parent", ["no file blocks here"])
    settings = ProposerSettings(
        model=ModelConfig(model=name, max_tokens=64), arm="prompt_only", max_revisions=0
    )

    async def node(state: _State) -> _State:
        result = await propose(ProposerBrief(), settings, out_dir=tmp_path)
        return {"result": result.model_dump(mode="json", exclude={"verdict"})}

    builder = StateGraph(_State)
    builder.add_node("propose", node)
    builder.add_edge(START, "propose")
    builder.add_edge("propose", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    out = await graph.ainvoke({}, {"configurable": {"thread_id": "t"}}, durability="sync")
    result = out["result"]
    assert "_put_checkpoint_fut" not in (result["error"] or "")
    # The model's reply reached the gate's format check: a rejection, not an infrastructure error.
    assert result["outcome"] == "failed" and result["turns"] == 1
    assert result["gates"] and "file" in result["gates"][0]["reason"]
