"""The proposer's learning demonstration end to end at a small size: the `learn-proposer`
preset's flywheel, 1 round, 2 proposers sharing a training brief, the graded reward, then the
curve.

Real: the flywheel graph, the proposers' terminal workspaces, the gate's builds and trials, the
rollout stores, the TRL GRPO worker (a tiny random model for the training side: the served policy
is SmolLM2 in the real run) and the reports. Scripted: the served policy's replies. Nothing here
asserts that the proposer learned; what it asserts is deterministic: the held-out point served
briefs built on the held-out folder and no training brief showed one; the rewards TRL trained on
are the graded arm's for the stage each proposal reached and the task files it wrote; the update
reports its behaviour line; the curve has the proposer's points."""

from __future__ import annotations

import importlib.util
import itertools
import json
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.config import REPO_TASKS, FlywheelContext, given_over_preset
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.tools.report.curve import Curve, write_curve
from autoenvscaling.training.proposer.update import GRADED_STEP
from autoenvscaling.training.worker_protocol import RESULT_FILE

from .flywheel_policy import BROKEN, FILES, blocks

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]

GENERATED = REPO_TASKS / "generated"
SEED = ("count-lines-00000",)
HELDOUT = ("replace-word-10000", "sort-numbers-10001")
#: A task without its verifier: rejected at lint, 4 of the 5 task files written.
NO_TESTS = {p: c for p, c in FILES.items() if p != "tests/test.sh"}


def scripted_proposer(heldout_briefs: list[str], training_briefs: list[str]):
    """The served policy: writes a task as `<file>` blocks, then calls `submit`. On a held-out
    brief: the sound task for brief 1, the planted bug for brief 2. On the training brief: the
    task without tests first, the planted bug second (a graded group with variance)."""
    training = itertools.count()

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        if any(isinstance(m, AIMessage) for m in messages):
            return reply("", tool_call("submit", summary="Sum the numbers."))
        brief = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        if any(name in brief for name in HELDOUT):
            heldout_briefs.append(brief)
            return blocks(FILES if "proposal 1 of" in brief else BROKEN)
        training_briefs.append(brief)
        return blocks(NO_TESTS if next(training) == 0 else BROKEN)

    return respond


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_model import TinyModelSpec, build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("model") / "tiny",
        spec=TinyModelSpec(max_position_embeddings=16384),
    )


@pytest.mark.timeout(1500)
async def test_the_proposer_demonstration_evaluates_heldout_briefs_and_trains_the_graded_arm(
    engine_ready, tiny_model: Path, tmp_path: Path
):
    seed_dir, heldout_dir = tmp_path / "seed", tmp_path / "heldout"
    for folder, names in ((seed_dir, SEED), (heldout_dir, HELDOUT)):
        for name in names:
            source = GENERATED / ("pool" if folder == seed_dir else "heldout") / name
            shutil.copytree(source, folder / name)
    heldout_briefs: list[str] = []
    training_briefs: list[str] = []
    run = tmp_path / "run"
    values = given_over_preset(
        {
            "run_dir": str(run),
            "rounds": 1,
            "policy_model": register(
                "learn-proposer-demo", scripted_proposer(heldout_briefs, training_briefs)
            ),
            "policy_server": "none",  # scripted: nothing to start or swap
            "cold_start": False,
            "seed_dir": str(seed_dir),
            "heldout_dir": str(heldout_dir),
            "proposals": 2,
            "proposer_group_size": 2,
            "proposer_heldout_briefs": 2,
            "proposer_heldout_samples": 1,
            "proposer_reward": "graded",
            "proposer_max_turns": 3,
            "calibrate": False,
            "base_model": str(tiny_model),
        },
        "learn-proposer",
    )
    ctx = FlywheelContext.from_values(values)
    assert ctx.train_steps == 0 and ctx.heldout_samples == 0 and ctx.refresh_attempts == 0
    graph = build_flywheel(checkpointer=InMemorySaver())
    await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "lp"}, "recursion_limit": 500}, context=ctx
    )

    # Held-out briefs show the held-out tasks; the training brief shows none of them.
    assert len(heldout_briefs) == 2 and len(training_briefs) == 2
    assert not any(name in b for name in HELDOUT for b in training_briefs)
    assert all(any(name in b for name in SEED) for b in training_briefs)

    # What TRL trained on: the graded rewards of the two proposals, as the worker recorded them.
    result = json.loads((run / "train" / "r01-proposer" / RESULT_FILE).read_text())
    rewards = sorted(e["reward"] for e in result["episodes"])
    no_tests = -1.0 + GRADED_STEP * 4 / 5  # rejected at lint, 4 of 5 files written
    oracle = -1.0 + 3 * GRADED_STEP  # built, rejected by its oracle
    assert rewards == [pytest.approx(no_tests), pytest.approx(oracle)]
    metrics = json.loads((run / "reports" / "metrics.json").read_text())[0]
    proposer = metrics["training"]["proposer"]
    assert proposer["reward_arm"] == "graded" and proposer["steps"] == 1
    assert "rewarded logp" in proposer["behaviour"]  # the update's behaviour line

    # The curve: the proposer's points, before round 1 and after it (the checkpoint is not
    # served without a policy server, so the point after is the one before, and says so).
    data, _ = write_curve(run)
    curve = Curve.model_validate_json(data.read_text())
    assert curve.proposer is not None
    assert [(p.point, p.samples) for p in curve.proposer.points] == [(0, 2), (1, 2)]
    before = curve.proposer.points[0]
    assert (before.passes_lint.mean, before.oracle_solves.mean) == (1.0, 0.5)
    assert curve.proposer.points[1].reused_from == "before round 1"
    [round_] = curve.proposer.rounds
    assert round_.reward_arm == "graded" and round_.checkpoint and round_.behaviour
    assert not curve.points  # the solver was neither measured nor trained
