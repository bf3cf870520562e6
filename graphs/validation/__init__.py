"""The admission gate as LangGraph graphs (langgraph.json's `validation`): one candidate, one node
per stage (`graph`), and many candidates fanned out (`batch_graph`); see `builder`.

`ValidationState` is exported here because checkpoints written before the graphs had packages
name it by this module (`checkpoint_serde` in graphs/flywheel/builder.py)."""

from .builder import (
    ValidationInput,
    ValidationOutput,
    ValidationState,
    batch_graph,
    build_batch_graph,
    build_validation_graph,
    graph,
    validate_batch,
)

__all__ = [
    "ValidationInput",
    "ValidationOutput",
    "ValidationState",
    "batch_graph",
    "build_batch_graph",
    "build_validation_graph",
    "graph",
    "validate_batch",
]
