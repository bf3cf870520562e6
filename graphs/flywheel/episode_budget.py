"""A training episode is a served episode: the GRPO episode's budgets, read from the run's settings.

The served solver (graphs/solver/harbor_agent.py) replies at most `max_tokens` a turn, makes `solver_max_turns`
model calls, samples at `temperature`, sees terminal results capped at `tool_output_chars`, and
lives inside the policy's `context_window`. `solver_episode` hands exactly those to the trainer
(`TrainHyperParams`); the worker turns them into TRL's knobs (training/grpo/worker.py
`trained_episode`) and reports what it ran. `episode_record` is what the manifest keeps: both
sides, and where TRL can only come close.
"""

from __future__ import annotations

from typing import Any

from ..config import RunConfig

#: Where TRL 1.16 cannot express the served episode exactly, and what stands in for it.
TRL_DIFFERENCES = (
    "turns: TRL runs max_turns tool-calling iterations, as many tool executions as the served "
    "solver's max_turns model calls, then lets the model reply once more to the last result (that "
    "reply's tool calls never run; its tokens are trained)",
    "context window: the served model fits each reply into what the window leaves (a reply is "
    "cut); TRL bounds the whole episode once (max_completion_length = the window less the job's "
    "longest first prompt, or every reply and tool result at its cap when the window is unknown) "
    "and drops a tool result that would overflow it",
    "time: the served solver also stops at its wall-time budget; TRL has none (each command keeps "
    "its own timeout)",
)


def solver_episode(config: RunConfig) -> dict[str, Any]:
    """`TrainHyperParams` fields for the solver's GRPO episode: the served solver's budgets."""
    return {
        "max_reply_tokens": config.max_tokens,
        "max_turns": config.solver_max_turns,
        "temperature": config.temperature,
        "context_window": config.context_window,
        "tool_output_chars": config.tool_output_chars,
    }


def episode_record(config: RunConfig) -> dict[str, Any]:
    """The manifest's `episodes`: the served solver's episode, the GRPO episode, the differences."""
    return {
        "served_solver": {
            "max_tokens_per_reply": config.max_tokens,
            "max_turns": config.solver_max_turns,
            "temperature": config.temperature,
            "context_window": config.context_window,
            "tool_output_chars": config.tool_output_chars,
        },
        "grpo": {
            **solver_episode(config),
            "max_completion_length": "per job: see each round's training summary (episode)",
        },
        "trl_differences": list(TRL_DIFFERENCES),
    }


__all__ = ["TRL_DIFFERENCES", "episode_record", "solver_episode"]
