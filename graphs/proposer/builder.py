"""The proposer graph `langgraph.json` serves: K proposer attempts fanned out with Send, each
running the attempt graph (graphs/proposer/episode.py), with a Studio form for its settings."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict, Field

from ...tools.agents.brief import ProposerBrief, build_brief
from ...tools.rollouts.store import RolloutStore
from ..config import PROPOSER_TIME_BUDGET_SEC, from_run
from ..models import ModelConfig
from . import settings as settings_module
from .episode import attempt_graph
from .record import propose
from .settings import ProposerSettings, proposer_budget


class ProposerContext(BaseModel):
    """What Studio's form shows for the proposer graph: a view of the run configuration
    (graphs/config.py) plus the standalone graph's own folders."""

    model_config = ConfigDict(extra="forbid")

    model: str = from_run("policy_model", description="init_chat_model string")
    base_url: str | None = from_run("policy_base_url", description="OpenAI-compatible endpoint")
    arm: str = from_run("arm")
    solver_feedback: bool = from_run("solver_feedback", description="Show the solver's rollouts")
    max_turns: int = from_run("proposer_max_turns", description="Model calls per episode")
    time_budget_sec: float = Field(
        default=PROPOSER_TIME_BUDGET_SEC, description="Wall time per episode"
    )
    max_tokens: int = from_run("max_tokens", 8192)
    max_revisions: int = from_run("max_revisions")
    pool_dir: str = Field(default="tasks/seed", description="The task pool (examples, dedup)")
    out_dir: str = Field(default="candidates", description="Candidate folders go here")
    store_path: str | None = Field(default=None, description="Rollout store (SQLite)")
    backend: str = from_run("backend", description="Gate engine: podman | docker")
    calibrate: bool = from_run("calibrate", False, "Calibrate against the solver (same model)")
    policy_version: str = Field(default="base", description="Recorded with rollouts")


class ProposeInput(TypedDict):
    n: int


class ProposeState(ProposeInput, total=False):
    briefs: list[dict[str, Any]]
    results: Annotated[list[dict[str, Any]], operator.add]


class _Slot(TypedDict):
    index: int
    brief: dict[str, Any]


def _settings_from(ctx: ProposerContext) -> ProposerSettings:
    model = ModelConfig(model=ctx.model, base_url=ctx.base_url, max_tokens=ctx.max_tokens)
    return ProposerSettings(
        model=model,
        arm=ctx.arm,  # type: ignore[arg-type]  # validated by pydantic
        solver_feedback=ctx.solver_feedback,
        max_revisions=ctx.max_revisions,
        budget=proposer_budget(ctx.max_turns, ctx.time_budget_sec),
        # Looked up on its module when called: tests swap in a quicker gate there.
        gate=settings_module.gate_config(
            backend=ctx.backend, pool_dir=ctx.pool_dir, solver=model if ctx.calibrate else None
        ),
        store_path=ctx.store_path,
        policy_version=ctx.policy_version,
        run_id="",
    )


async def _inspect(state: ProposeState, runtime: Runtime[ProposerContext]) -> dict[str, Any]:
    ctx = runtime.context or ProposerContext()
    store = RolloutStore(ctx.store_path) if ctx.store_path else None
    try:
        briefs = [
            await asyncio.to_thread(
                build_brief, store, ctx.pool_dir, variant=i, solver_feedback=ctx.solver_feedback
            )
            for i in range(max(1, state.get("n", 1)))
        ]
    finally:
        if store is not None:
            store.close()
    return {"briefs": [b.model_dump(mode="json") for b in briefs]}


def _fan_out(state: ProposeState) -> list[Send]:
    briefs = state.get("briefs", [])  # written by _inspect
    return [Send("propose_one", _Slot(index=i, brief=b)) for i, b in enumerate(briefs)]


async def _propose_one(state: _Slot, runtime: Runtime[ProposerContext]) -> dict[str, Any]:
    """One attempt: the attempt graph (episode -> gate -> revise), this node's subgraph."""
    slot = state  # one brief, sent by _fan_out
    ctx = runtime.context or ProposerContext()
    result = await propose(
        ProposerBrief.model_validate(slot["brief"]),
        _settings_from(ctx),
        out_dir=ctx.out_dir,
        index=slot["index"],
        graph=attempt_graph,
    )
    return {"results": [result.model_dump(mode="json", exclude={"verdict"})]}


def build_proposer_graph() -> Any:
    builder = StateGraph(ProposeState, input_schema=ProposeInput, context_schema=ProposerContext)
    builder.add_node("inspect", _inspect)
    builder.add_node("propose_one", _propose_one)
    builder.add_edge(START, "inspect")
    builder.add_conditional_edges("inspect", _fan_out, ["propose_one"])
    builder.add_edge("propose_one", END)
    return builder.compile(name="proposer")


graph = build_proposer_graph()
