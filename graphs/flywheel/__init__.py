"""The flywheel graph (langgraph.json's `flywheel`): inspect -> propose (fan-out) -> admit (the
gate per candidate) -> train -> refresh -> ...

One round reads the solver's experience from the rollout store, lets K proposers write candidate
environments, admits what the validation gate accepts into the pool, trains the shared policy on
the round's admitted and replay tasks, swaps the new checkpoint in for both roles, and re-measures
the pool with the new policy, retiring tasks that left the difficulty band.

Modules, one idea each: `state` (what the graph holds), `nodes` (one function per node),
`measure` (the served policy's recorded attempts: baseline, held-out, refresh), `admission` (a
proposer attempt and its gate), `training` (both roles' updates and the swap), `episode_budget`,
`roles` (the policy server both roles call), `builder` (the graph wired, its checkpoint serde).
"""

from ..config import FlywheelContext  # the graph's context, imported from here before the move
from .builder import build_flywheel, checkpoint_serde, graph

__all__ = ["FlywheelContext", "build_flywheel", "checkpoint_serde", "graph"]
