"""The flywheel graph: its nodes (nodes.py) wired, and the serializer its checkpoints need.

`graph` (langgraph.json's `flywheel`, Studio) is compiled without a checkpointer;
`build_flywheel()` takes one for durable runs (the CLI's run folder) and for embedding in other
apps.
"""

from __future__ import annotations

from typing import Any, get_args, get_type_hints, is_typeddict

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import START, StateGraph
from pydantic import BaseModel

from ..config import FlywheelContext
from ..validation import ValidationState
from .nodes import admit_one, inspect, propose, propose_one, refresh, review, setup, train
from .state import AdmitItem, FlywheelInput, FlywheelState, SlotTask

#: Modules that checkpoints written before the graphs had packages name for a model that moved
#: since (the serializer checks module and name, then imports that module).
STORED_MODULES = {
    "autoenvscaling.graphs.flywheel.state": "autoenvscaling.graphs.flywheel_state",
    "autoenvscaling.graphs.validation.builder": "autoenvscaling.graphs.validation",
}


def state_models(*schemas: Any) -> set[type[BaseModel]]:
    """Every pydantic model a value of these state schemas can hold (fields followed inward)."""
    found: set[type[BaseModel]] = set()

    def visit(tp: Any) -> None:
        if isinstance(tp, type) and issubclass(tp, BaseModel):
            if tp in found:
                return
            found.add(tp)
            for field in tp.model_fields.values():
                visit(field.annotation)
        elif is_typeddict(tp):
            for hint in get_type_hints(tp).values():
                visit(hint)
        for arg in get_args(tp):
            visit(arg)

    for schema in schemas:
        visit(schema)
    return found


def checkpoint_serde() -> JsonPlusSerializer:
    """The serializer for a flywheel checkpointer: restores the models of the flywheel's state
    and of the graphs that run inside its nodes under the same checkpointer (the validation
    graph), by name, and refuses any other class a checkpoint might name (strict msgpack).
    Names stored before a model moved (`STORED_MODULES`) are allowed too."""
    models = state_models(FlywheelState, SlotTask, AdmitItem, ValidationState)
    allowed = {(m.__module__, m.__name__) for m in models}
    allowed |= {
        (STORED_MODULES[module], name) for module, name in allowed if module in STORED_MODULES
    }
    return JsonPlusSerializer(allowed_msgpack_modules=sorted(allowed))


def build_flywheel(checkpointer: Any = None, store: Any = None, *, name: str = "flywheel") -> Any:
    """The flywheel graph; pass a checkpointer for durable runs (the CLI uses SQLite)."""
    builder = StateGraph(FlywheelState, input_schema=FlywheelInput, context_schema=FlywheelContext)
    builder.add_node("setup", setup)
    builder.add_node("inspect", inspect)
    builder.add_node("propose", propose)
    builder.add_node("propose_one", propose_one)
    # A Send target: its input is the AdmitItem propose_one sends, not the flywheel state.
    builder.add_node("admit_one", admit_one)
    # Deferred: waits until every proposer branch (with its revisions) has finished.
    builder.add_node("review", review, defer=True)
    builder.add_node("train", train)
    builder.add_node("refresh", refresh)
    builder.add_edge(START, "setup")
    builder.add_edge("setup", "inspect")
    builder.add_edge("inspect", "propose")
    builder.add_edge("admit_one", "review")
    builder.add_edge("review", "train")
    builder.add_edge("train", "refresh")
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


graph = build_flywheel()
