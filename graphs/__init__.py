"""LangGraph graphs: the flywheel, the roles and the gate's validation."""

import warnings

# Graphs without a checkpointer (agent loops, the admission's validation) are invoked with
# durability="exit" inside the CLI's durability="sync" flywheel: langgraph 1.2.24 otherwise fails
# them (AttributeError: _put_checkpoint_fut), and warns that the explicit value has no effect.
warnings.filterwarnings(
    "ignore", message="`durability` has no effect when no checkpointer", category=UserWarning
)
