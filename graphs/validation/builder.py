"""The admission gate as LangGraph graphs.

- `build_validation_graph()`: one candidate, one node per stage of the gate's sequence
  (`tools/gate/pipeline.py`: `STAGES` in order, `next_stage` to stop), then `verdict`. Every
  stage node declares both exits (the next stage, `verdict`), so Studio draws them and shows
  which one a run took; a failing stage jumps straight to `verdict`.
- `build_batch_graph()`: many candidates at once. `fan_out` sends each one (`Send`) to
  `validate_candidate`, which runs the validation graph under a concurrency limit and turns any
  crash into an infrastructure verdict, so one broken candidate never stops the others;
  `report` gathers the verdicts in input order.

The stage logic lives in `autoenvscaling.tools.gate`; nodes only route. The run's `GateConfig`
is the context (`context_schema`), so Studio shows its fields as a form. Progress goes to the
custom stream: one event per stage and one per verdict.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Checkpointer, Command, Send
from pydantic import BaseModel, Field

from ...tools.gate import (
    STAGES,
    GateConfig,
    StageName,
    StageResult,
    Verdict,
    infrastructure_verdict,
    make_verdict,
    run_stage,
)
from ...tools.gate.harness import slots
from ...tools.gate.pipeline import next_stage
from ..solver.attempt import SOLVER_AGENT

# --------------------------------------------------------------------------- state


class ValidationInput(BaseModel):
    task: str = Field(description="Path of the candidate Harbor task folder.")


class ValidationOutput(BaseModel):
    verdict: Verdict | None = None


class ValidationState(ValidationInput):
    results: Annotated[list[StageResult], operator.add] = Field(
        default_factory=list, description="One result per stage run, in order."
    )
    verdict: Verdict | None = None


type ValidationGraph = CompiledStateGraph[
    ValidationState, GateConfig, ValidationInput, ValidationOutput
]


def _config(runtime: Runtime[GateConfig]) -> GateConfig:
    """The run's gate config; our solver agent named when the context does not name one (the
    gate's own layer names no agent of this one)."""
    config = runtime.context if runtime.context is not None else GateConfig()
    if config.solver_agent is None:
        return config.model_copy(update={"solver_agent": SOLVER_AGENT})
    return config


def _stage_node(stage: StageName):
    """The node that runs `stage` and routes by `next_stage`: on to the next stage, or straight
    to the verdict."""

    async def run(state: ValidationState, runtime: Runtime[GateConfig]) -> Command[Any]:
        prior: dict[StageName, StageResult] = {r.stage: r for r in state.results}
        result = await run_stage(stage, state.task, _config(runtime), prior)
        runtime.stream_writer(
            {
                "event": "stage",
                "task": state.task,
                "stage": stage,
                "passed": result.passed,
                "skipped": result.skipped,
                "infrastructure_error": result.infrastructure_error,
                "duration_sec": result.duration_sec,
                "reason": result.reason,
            }
        )
        return Command(update={"results": [result]}, goto=next_stage(stage, result) or "verdict")

    return run


def verdict(state: ValidationState, runtime: Runtime[GateConfig]) -> dict[str, Verdict]:
    """Admitted or not, the rejecting stage and why, the proposer's reward."""
    return {"verdict": make_verdict(state.task, state.results, backend=_config(runtime).backend)}


def build_validation_graph(
    *,
    checkpointer: Checkpointer = None,  # False: never durable, even inside a checkpointed graph
    store: BaseStore | None = None,
    name: str = "validation",
) -> ValidationGraph:
    builder = StateGraph(
        ValidationState,
        context_schema=GateConfig,
        input_schema=ValidationInput,
        output_schema=ValidationOutput,
    )
    for stage, after in zip(STAGES, [*STAGES[1:], "verdict"], strict=True):
        # Both exits declared, so Studio draws them (a Command's targets are not otherwise known).
        builder.add_node(stage, _stage_node(stage), destinations=(after, "verdict"))
    builder.add_node("verdict", verdict)
    builder.add_edge(START, "lint")
    builder.add_edge("verdict", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


# --------------------------------------------------------------------------- batch


class BatchInput(BaseModel):
    tasks: list[str] = Field(description="Candidate task folders to validate.")


class BatchOutput(BaseModel):
    verdicts: list[Verdict] = Field(default_factory=list)
    admitted: list[str] = Field(default_factory=list, description="Admitted task folders.")


class BatchState(BatchInput):
    verdicts: Annotated[list[Verdict], operator.add] = Field(default_factory=list)
    admitted: list[str] = Field(default_factory=list)


type BatchGraph = CompiledStateGraph[BatchState, GateConfig, BatchInput, BatchOutput]


class Candidate(BaseModel):
    task: str
    index: int
    total: int


def fan_out(state: BatchState) -> Command[Literal["validate_candidate", "report"]]:
    """One `Send` per candidate: they run in one superstep, in parallel."""
    if not state.tasks:
        return Command(goto="report")
    total = len(state.tasks)
    return Command(
        goto=[
            Send("validate_candidate", Candidate(task=t, index=i, total=total))
            for i, t in enumerate(state.tasks)
        ]
    )


def make_validate_candidate(validation: ValidationGraph):
    async def validate_candidate(
        state: Candidate, runtime: Runtime[GateConfig]
    ) -> Command[Literal["report"]]:
        """Run the validation graph on one candidate; a crash becomes an infrastructure verdict."""
        config = _config(runtime)
        async with slots("candidate", config.concurrency):
            try:
                out = await validation.ainvoke(ValidationInput(task=state.task), context=config)
                result = out["verdict"] if isinstance(out, dict) else out.verdict
                verdict_ = Verdict.model_validate(result)
            except Exception as exc:  # noqa: BLE001 - one broken candidate never stops a batch
                verdict_ = infrastructure_verdict(state.task, exc, backend=config.backend)
        runtime.stream_writer(
            {
                "event": "verdict",
                "task": state.task,
                "index": state.index,
                "total": state.total,
                "admitted": verdict_.admitted,
                "stage": verdict_.stage,
                "reason": verdict_.reason,
                "proposer_reward": verdict_.proposer_reward,
            }
        )
        return Command(update={"verdicts": [verdict_]}, goto="report")

    return validate_candidate


def report(state: BatchState) -> dict[str, list[str]]:
    """The admitted candidates, in the order they were given."""
    admitted = {v.task for v in state.verdicts if v.admitted}
    return {"admitted": [t for t in state.tasks if t in admitted]}


def build_batch_graph(
    *,
    validation: ValidationGraph | None = None,
    checkpointer: BaseCheckpointSaver | None = None,
    store: BaseStore | None = None,
    name: str = "validation_batch",
) -> BatchGraph:
    builder = StateGraph(
        BatchState, context_schema=GateConfig, input_schema=BatchInput, output_schema=BatchOutput
    )
    builder.add_node("fan_out", fan_out)
    builder.add_node(
        "validate_candidate", make_validate_candidate(validation or build_validation_graph())
    )
    builder.add_node("report", report)
    builder.add_edge(START, "fan_out")
    builder.add_edge("report", END)
    return builder.compile(checkpointer=checkpointer, store=store, name=name)


async def validate_batch(
    tasks: Sequence[Path | str],
    config: GateConfig | None = None,
    *,
    on_event: Callable[[dict[str, Any]], None] | None = None,
    graph: BatchGraph | None = None,
) -> list[Verdict]:
    """Run the batch graph over `tasks`; `on_event` gets each progress event (stage, verdict)
    as it happens. Verdicts come back in the order of `tasks`."""
    config = config or GateConfig()
    names = [str(Path(t)) for t in tasks]
    final: dict[str, Any] = {}
    async for namespace, mode, chunk in (graph or batch_graph).astream(
        BatchInput(tasks=names), context=config, stream_mode=["custom", "values"], subgraphs=True
    ):
        if mode == "custom" and on_event is not None and isinstance(chunk, dict):
            on_event(chunk)
        elif mode == "values" and not namespace and isinstance(chunk, dict):
            final = chunk
    verdicts = [Verdict.model_validate(v) for v in final.get("verdicts", [])]
    by_task = {v.task: v for v in verdicts}
    return [by_task[t] for t in names if t in by_task]


graph = build_validation_graph()
batch_graph = build_batch_graph(validation=graph)
