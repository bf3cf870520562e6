"""How a node runs another compiled graph: the same object, never checkpointed.

A node names the module-level compiled graph it runs (the one `langgraph.json` serves), so
LangGraph finds it as the node's subgraph (`find_subgraph_pregel` reads the node function's
globals) and Studio's xray view draws and streams its nodes inside the parent's. It runs a copy
of that object with `checkpointer=False`: a nested graph keeps no checkpoints of its own, so a
node killed midway runs again from its start on `--resume` (its side effects are idempotent),
never from the middle of a conversation with a sandbox that died with the process. LangGraph
does not list a `checkpointer=False` graph as a subgraph, hence the named served graph.
"""

from __future__ import annotations

from typing import Any

from langgraph.pregel import Pregel


def non_durable[G: Pregel[Any, Any, Any, Any]](graph: G) -> G:
    """The same compiled graph (same nodes, channels and schemas), with no checkpointer: not
    the parent's and not its own. Invoke it with durability="exit" (langgraph 1.2.24 fails a
    checkpointer-less child that inherits a parent's durability="sync": `_put_checkpoint_fut`)."""
    return graph.copy(update={"checkpointer": False})
