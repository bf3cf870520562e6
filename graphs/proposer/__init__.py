"""The proposer role: an agent that writes a Harbor task, proves it runs and submits it to the gate.

Three generation arms, as configuration (the paper's comparison):
- `terminal`: a tool loop in its own workspace sandbox with the task folder bound in, over MCP
  tools only — terminal, filesystem (the folder on the host), rollout reader, and the gate's
  `check` / `submit`. It ends at `submit` or at its budget.
- `error_feedback`: no tools; the model writes every file in one reply (`<file path>` blocks),
  then reads the gate's rejection and rewrites.
- `prompt_only`: one reply, no feedback.
After a submission the full gate (the validation graph, with calibration when a solver is
configured) decides; a rejection opens a revision with the gate's stage, reason and excerpt in
context, up to `max_revisions`: the attempt graph's edges episode -> gate -> revise -> episode.
`solver_feedback=False` removes the rollout evidence from the brief (and the rollout reader from
the tools). Each attempt is one rollout (role "proposer") whose reward is the gate's proposer
reward: +1 admitted, -0.25 failed calibration, -1 rejected or unsubmitted.

    autoenvscaling propose --n 2 --model openai:policy --base-url http://localhost:8000/v1

Modules, one idea each: `settings` (what an attempt is given and returns, the gate it faces),
`prompts`, `workspace` (the terminal arm's tools), `episode` (the attempt graph), `record`
(`propose`: one attempt run and recorded), `studio` (the graph `langgraph.json` serves).
"""

from .builder import ProposerContext, build_proposer_graph, graph
from .episode import attempt_graph
from .prompts import (
    brief_prompt,
    fit_first_prompt,
    revision_prompt,
    system_prompt,
)
from .record import propose
from .settings import (
    ARMS,
    ProposalResult,
    ProposerSettings,
    gate_config,
)
from .workspace import proposer_tools

__all__ = [
    "ARMS",
    "ProposalResult",
    "ProposerContext",
    "ProposerSettings",
    "attempt_graph",
    "brief_prompt",
    "build_proposer_graph",
    "fit_first_prompt",
    "gate_config",
    "graph",
    "propose",
    "proposer_tools",
    "revision_prompt",
    "system_prompt",
]
