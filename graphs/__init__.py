"""LangGraph graphs: the flywheel, the roles and the gate's validation."""

from .agent.langgraph_adapter import install as _install_langgraph_adapter

_install_langgraph_adapter()  # nested graphs pass durability="exit": see the adapter
