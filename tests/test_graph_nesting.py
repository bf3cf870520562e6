"""The loop is one graph: the flywheel's nodes run the compiled proposer attempt, validation and
solver graphs (the ones `langgraph.json` serves) as subgraphs, so Studio's xray view draws their
nodes inside the flywheel's; and what runs is never checkpointed (graphs/agent/nesting.py)."""

from __future__ import annotations

import pytest

from autoenvscaling.graphs import proposer
from autoenvscaling.graphs.agent.nesting import non_durable
from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.graphs.solver import builder as solver_graph
from autoenvscaling.graphs.validation import builder as validation

from .conftest import SEED_DIR

pytestmark = pytest.mark.timeout(120)

STAGES = ("lint", "build", "oracle", "nop", "repeat", "anti_cheat", "decontam", "calibrate")


def nested_nodes(nodes: set[str]) -> dict[str, set[str]]:
    """Which parent nodes hold which subgraph nodes (by xray's `parent:child` ids)."""
    found: dict[str, set[str]] = {}
    for node in nodes:
        if ":" in node:
            parent, _, child = node.partition(":")
            found.setdefault(parent, set()).add(child)
    return found


def assert_flywheel_nesting(nodes: set[str]) -> None:
    """The proposer attempt (with the validation graph as its gate), the admission's validation
    graph and the solver graph (baseline in inspect, refresh) are drawn inside the flywheel."""
    nested = nested_nodes(nodes)
    assert {"episode", "revise"} <= nested["propose_one"], nested
    assert {f"gate:{s}" for s in (*STAGES, "verdict")} <= nested["propose_one"], nested
    assert {*STAGES, "dedup", "verdict"} <= nested["admit_one"], nested
    assert nested["inspect"] == {"attempt"} and nested["refresh"] == {"attempt"}, nested


def test_flywheel_xray_shows_the_proposer_validation_and_solver_graphs():
    assert_flywheel_nesting(set(build_flywheel().get_graph(xray=True).nodes))
    # Without xray the flywheel is its own nine nodes.
    assert not nested_nodes(set(build_flywheel().get_graph().nodes))


def test_the_served_proposer_graph_nests_the_attempt_and_its_gate():
    nested = nested_nodes(set(proposer.graph.get_graph(xray=True).nodes))
    assert {"episode", "revise", "gate:lint", "gate:verdict"} <= nested["propose_one"], nested


def test_what_runs_is_the_served_graph_never_checkpointed():
    for served in (proposer.attempt_graph, validation.graph, solver_graph.graph):
        assert served.checkpointer is None  # a parent lends its checkpointer: Studio sees it
        running = non_durable(served)
        assert running.checkpointer is False
        assert running.builder is served.builder  # the same nodes, the same objects
        assert all(running.nodes[name] is node for name, node in served.nodes.items())


async def test_a_revision_runs_as_graph_steps_and_streams_from_its_subgraphs(tmp_path):
    """The served proposer graph, streamed as Studio streams it: the rejected first reply, the
    revision and the admitted second one are steps of the attempt graph nested in
    `propose_one`, and each gate stage a step of the validation graph nested in `gate`."""
    from .flywheel_policy import BROKEN, blocks
    from .test_proposer import QUICK_GATE

    model = register("nesting-revision", ["no file blocks here", blocks(BROKEN)])
    ctx = proposer.ProposerContext(
        model=model,
        arm="error_feedback",
        max_revisions=1,
        pool_dir=str(SEED_DIR),
        out_dir=str(tmp_path / "cand"),
    )
    steps: list[tuple[str, str]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proposer.settings, "gate_config", lambda **_kw: QUICK_GATE)
        async for namespace, update in proposer.graph.astream(
            {"n": 1}, context=ctx, stream_mode="updates", subgraphs=True
        ):
            path = "|".join(part.split(":")[0] for part in namespace)
            steps += [(path, node) for node in update]
    attempt = [node for path, node in steps if path == "propose_one"]
    assert attempt == ["episode", "gate", "revise", "episode", "gate"], steps
    # The first reply is no task (rejected before any stage); the second passes every stage.
    stages = [node for path, node in steps if path == "propose_one|gate"]
    assert stages == [*STAGES, "dedup", "verdict"], steps


async def test_a_candidate_changed_while_its_gate_runs_is_not_admitted(tmp_path):
    """Attack on the proposer's own gate: the submitted folder is rewritten between two stages
    (as a background process left in the workspace could). The stages judged a mix of versions,
    so the attempt is rejected with the validation-failed reward, never admitted. With no
    revision allowed, the gate still runs every stage (it once inherited the attempt graph's
    step limit and stopped with a recursion error)."""
    from pathlib import Path

    from autoenvscaling.tools.gate import run_stage

    from .flywheel_policy import BROKEN, blocks
    from .test_proposer import QUICK_GATE

    async def tampering_stage(stage, task, config, prior):
        result = await run_stage(stage, task, config, prior)
        if stage == "lint":
            (Path(task) / "instruction.md").write_text("rewritten while the gate ran\n")
        return result

    model = register("nesting-tamper", [blocks(BROKEN)])
    ctx = proposer.ProposerContext(
        model=model,
        arm="error_feedback",
        max_revisions=0,
        pool_dir=str(SEED_DIR),
        out_dir=str(tmp_path / "cand"),
    )
    verdicts = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(proposer.settings, "gate_config", lambda **_kw: QUICK_GATE)
        patch.setattr(validation, "run_stage", tampering_stage)
        async for namespace, update in proposer.graph.astream(
            {"n": 1}, context=ctx, stream_mode="updates", subgraphs=True
        ):
            if [part.split(":")[0] for part in namespace] == ["propose_one"] and "gate" in update:
                verdicts.append(update["gate"]["result"].verdict)
    assert len(verdicts) == 1, verdicts
    verdict = verdicts[0]
    assert not verdict.admitted and "changed while the gate checked" in verdict.reason
    assert verdict.proposer_reward == -1.0
