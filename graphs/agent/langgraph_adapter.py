"""LangGraph's adapter: where we work around LangGraph itself (tests/test_public_apis.py).

A graph that runs inside a node of another (graphs/agent/nesting.py: the agent loops, the proposer's
attempt, the validation gate) keeps no checkpoints of its own. Inside the CLI's flywheel, which
runs with `durability="sync"`, such a child inherits "sync" and langgraph 1.2.24 then fails it
(`AttributeError: ... _put_checkpoint_fut`, waiting for a checkpoint that no checkpointer makes).
Every nested invocation therefore passes `durability="exit"`, which LangGraph accepts and answers
with a `UserWarning` ("`durability` has no effect when no checkpointer is present") on every
call. `install()` silences exactly that warning, and only as LangGraph's own module raises it: a
`durability` passed by anyone else's code is warned about as usual.

tests/test_adapters.py fails when a LangGraph upgrade fixes the inheritance (drop this module and
the `durability="exit"` arguments) or rewords the warning (the filter would no longer match).
"""

from __future__ import annotations

import warnings

#: The warning LangGraph gives a checkpointer-less graph invoked with a `durability`.
DURABILITY_WARNING = "`durability` has no effect when no checkpointer"
#: The module that raises it (`warnings.warn` with the default stacklevel).
WARNING_MODULE = r"langgraph\.pregel\.main"


def install() -> None:
    """Silence LangGraph's durability warning for checkpointer-less graphs (idempotent)."""
    warnings.filterwarnings(
        "ignore", message=DURABILITY_WARNING, category=UserWarning, module=WARNING_MODULE
    )
