"""The solver role: a terminal agent inside a real Harbor trial (`harbor_agent.SolverAgent`), one
recorded attempt (`attempt`), and the graph langgraph.json serves as `solver` (`builder`: tasks
attempted k times each).

`SolverAgent` is exported here because Harbor trial configs name it by this path
(`autoenvscaling.graphs.solver:SolverAgent`, stored in every trial's config.json)."""

from .attempt import SOLVER_AGENT
from .builder import build_solver_graph, graph
from .harbor_agent import SolverAgent

__all__ = ["SOLVER_AGENT", "SolverAgent", "build_solver_graph", "graph"]
