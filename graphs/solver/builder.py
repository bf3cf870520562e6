"""The solver graph (langgraph.json's `solver`, nested in the flywheel's inspect and refresh):
attempt tasks k times each (graphs/solver/attempt.py: solve_task), fanned out with Send."""

from __future__ import annotations

import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict, Field

from ..agent.loop import LoopBudget
from ..config import from_run
from ..models import ModelConfig
from .attempt import SolverSettings, solve_task


class SolverContext(BaseModel):
    """What Studio's form shows for the solver graph: a view of the run configuration
    (graphs/config.py) plus the standalone graph's own rollout store."""

    model_config = ConfigDict(extra="forbid")

    model: str = from_run("policy_model", description="init_chat_model string")
    base_url: str | None = from_run("policy_base_url", description="OpenAI-compatible endpoint")
    max_turns: int = from_run("solver_max_turns", description="Model calls per attempt")
    time_budget_sec: float = Field(default=900, description="Wall time per attempt")
    backend: str = from_run("backend")
    store_path: str | None = Field(default=None, description="Rollout store (SQLite)")
    policy_version: str = Field(default="base", description="Recorded with rollouts")


class SolveInput(TypedDict):
    tasks: list[str]
    attempts: int


class SolveRun(SolveInput, total=False):
    """What a caller with a run of its own adds (the flywheel's baseline and refresh): the full
    settings of every attempt (store, run id, round, tags), the first sample's index and the
    trials folder. Without them, the context's form fields decide."""

    settings: dict[str, Any]  # a SolverSettings, as JSON
    first_sample: int
    trials_dir: str | None


class SolveState(SolveRun, total=False):
    results: Annotated[list[dict[str, Any]], operator.add]


class _One(TypedDict):
    task: str
    sample: int
    settings: dict[str, Any] | None
    trials_dir: str | None


def _fan_out(state: SolveState) -> list[Send]:
    first = state.get("first_sample", 0)
    return [
        Send(
            "attempt",
            _One(
                task=t,
                sample=first + i,
                settings=state.get("settings"),
                trials_dir=state.get("trials_dir"),
            ),
        )
        for t in state["tasks"]
        for i in range(max(1, state.get("attempts", 1)))
    ]


async def _attempt(state: _One, runtime: Runtime[SolverContext]) -> dict[str, Any]:
    item = state  # one (task, sample), sent by _fan_out
    ctx = runtime.context or SolverContext()
    if item.get("settings"):
        settings = SolverSettings.model_validate(item["settings"])
    else:
        settings = SolverSettings(
            model=ModelConfig(model=ctx.model, base_url=ctx.base_url),
            budget=LoopBudget(max_turns=ctx.max_turns, time_budget_sec=ctx.time_budget_sec),
            store_path=ctx.store_path,
            policy_version=ctx.policy_version,
            run_id="studio",
        )
    trials_dir = item.get("trials_dir")
    result = await solve_task(
        Path(item["task"]),
        settings,
        sample=item["sample"],
        backend=ctx.backend,
        trials_dir=Path(trials_dir) if trials_dir else None,
    )
    return {"results": [result.model_dump(mode="json")]}


def build_solver_graph() -> Any:
    builder = StateGraph(SolveState, input_schema=SolveRun, context_schema=SolverContext)
    builder.add_node("attempt", _attempt)
    builder.add_conditional_edges(START, _fan_out, ["attempt"])
    builder.add_edge("attempt", END)
    return builder.compile(name="solver")


graph = build_solver_graph()
