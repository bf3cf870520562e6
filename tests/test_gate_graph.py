"""The validation subgraph and the batch graph, invoked as compiled LangGraph graphs."""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from autoenvscaling.graphs.validation.builder import (
    build_batch_graph,
    build_validation_graph,
    graph,
    validate_batch,
)
from autoenvscaling.tools.gate import STAGES, GateConfig, Verdict

from .conftest import FIXTURES

GATE_TASKS = FIXTURES / "gate_tasks"


async def path_of(task, context) -> tuple[list[str], Verdict]:
    nodes: list[str] = []
    verdict = None
    async for update in graph.astream({"task": str(task)}, context=context, stream_mode="updates"):
        for node, value in update.items():
            nodes.append(node)
            if node == "verdict":
                verdict = value["verdict"]
    assert verdict is not None
    return nodes, verdict


def test_every_stage_routes_to_the_next_stage_or_to_the_verdict():
    drawn = graph.get_graph()
    edges = {(e.source, e.target) for e in drawn.edges}
    chain = [*STAGES, "verdict"]
    for stage, after in zip(STAGES, chain[1:], strict=True):
        assert (stage, after) in edges and (stage, "verdict") in edges
    assert ("__start__", "lint") in edges and ("verdict", "__end__") in edges
    assert set(graph.context_schema.model_fields) == set(GateConfig.model_fields)


async def test_a_failing_candidate_jumps_from_its_stage_to_the_verdict(engine_ready):
    nodes, verdict = await path_of(GATE_TASKS / "failing_oracle", GateConfig())
    assert nodes == ["lint", "build", "oracle", "verdict"]
    assert (verdict.stage, verdict.proposer_reward) == ("oracle", -1.0)


async def test_an_admitted_candidate_walks_every_stage(engine_ready):
    # Context as a plain dict, the way Studio and the server send it.
    nodes, verdict = await path_of(FIXTURES / "good_task", {"skip": ["calibrate"], "repeat": 1})
    assert nodes == [*STAGES, "verdict"]
    assert verdict.admitted and verdict.skipped == ["decontam", "calibrate", "dedup"]


async def test_a_checkpointed_run_keeps_its_verdict_in_state():
    compiled = build_validation_graph(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "gate-1"}}
    await compiled.ainvoke(
        {"task": str(GATE_TASKS / "invalid_toml")}, config, context=GateConfig(), durability="sync"
    )
    state = await compiled.aget_state(config)
    assert state.values["verdict"].stage == "lint" and not state.next


class _Task(TypedDict):
    task: str
    verdict: Verdict | None


def crashing_validation():
    """The real validation graph, except that a candidate named 'boom' crashes it."""

    async def run(state: _Task) -> dict:
        if "boom" in state["task"]:
            raise RuntimeError("the sandbox host vanished")
        return await graph.ainvoke({"task": state["task"]}, context=GateConfig())

    return StateGraph(_Task).add_node("run", run).add_edge(START, "run").compile()


async def test_one_broken_candidate_never_stops_the_batch():
    batch = build_batch_graph(validation=crashing_validation())
    tasks = [
        str(GATE_TASKS / "invalid_toml"),
        str(GATE_TASKS / "boom"),
        str(GATE_TASKS / "missing_test_sh"),
    ]
    events: list[dict] = []
    verdicts = await validate_batch(tasks, GateConfig(), on_event=events.append, graph=batch)
    assert [v.task for v in verdicts] == tasks
    ok1, boom, ok2 = verdicts
    assert (ok1.stage, ok2.stage) == ("lint", "lint")
    assert boom.infrastructure_error and boom.proposer_reward is None
    assert "the sandbox host vanished" in boom.reason
    done = [e for e in events if e["event"] == "verdict"]
    assert sorted(e["task"] for e in done) == sorted(tasks) and {e["total"] for e in done} == {3}


async def test_the_batch_respects_its_concurrency_limit(engine_ready):
    tasks = [
        str(GATE_TASKS / "failing_oracle"),
        str(GATE_TASKS / "passes_initial_state"),
        str(GATE_TASKS / "invalid_toml"),
    ]
    events: list[dict] = []
    verdicts = await validate_batch(tasks, GateConfig(concurrency=1), on_event=events.append)
    assert [v.stage for v in verdicts] == ["oracle", "nop", "lint"]
    # One candidate at a time: each candidate's stage events form one unbroken run.
    order = [e["task"] for e in events if e["event"] == "stage"]
    runs = [t for i, t in enumerate(order) if i == 0 or order[i - 1] != t]
    assert sorted(runs) == sorted(tasks)
