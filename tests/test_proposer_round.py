"""Proposer training that happens: a real round's proposer group trains the policy's adapter.

One flywheel round with everything real but the model's replies: two terminal-arm proposers on
one brief (the MCP filesystem and gate tools, a workspace sandbox each, the gate's builds and
Harbor trials, the admission with its calibration), then the training node: the proposer's TRL
GRPO update first, from the checkpoint that sampled the proposals, then the solver's GRPO step
from the proposer's checkpoint. And the refusal: a `--proposer-model` other than the policy
never trains the policy on that model's transcripts.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import json
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call

from .conftest import FIXTURES
from .flywheel_policy import BROKEN, FILES, FIX

needs_train = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
    reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
)


def two_proposers() -> Callable[[Sequence[BaseMessage]], AIMessage | str]:
    """The shared policy: the first proposer to speak writes a sound task, the second one whose
    reference solution sums 3 of 5 numbers (the oracle rejects it). Both see the same brief;
    each later turn follows the plan its own first reply named. The solver solves every other
    episode (calibration measures 0.5)."""
    first_replies = itertools.count()
    solver_episodes = itertools.count()

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        system = str(messages[0].content) if isinstance(messages[0], SystemMessage) else ""
        mine = [m for m in messages if isinstance(m, AIMessage)]
        if "expert author of benchmark tasks" not in system:  # the solver (and the cheat agent)
            if mine or "skilled terminal agent" not in system:
                return "Done."
            if next(solver_episodes) % 2 == 0:
                return reply("", tool_call("run", command=f"{FIX} > /app/sum.txt"))
            return reply("", tool_call("run", command="ls"))
        if not mine:
            plan = "A" if next(first_replies) == 0 else "B"
            files = FILES if plan == "A" else BROKEN
            writes = [tool_call("write_file", path=p, content=c) for p, c in files.items()]
            return reply(f"Plan {plan}: a task that sums numbers.", *writes)
        if len(mine) == 1:
            return reply("Submit.", tool_call("submit", summary="sum a column"))
        return "done"

    return respond


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from tests.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny")


@needs_train
@pytest.mark.train
@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_a_real_round_trains_the_proposer_group_and_the_solver_continues_from_it(
    engine_ready, tiny_model, tmp_path
):
    from safetensors.torch import load_file

    from autoenvscaling.graphs.config import FlywheelContext, preset
    from autoenvscaling.graphs.flywheel.builder import build_flywheel
    from autoenvscaling.graphs.flywheel.training import train_proposer
    from autoenvscaling.tools.rollouts.store import RolloutStore
    from autoenvscaling.tools.run_dir import RunDir
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.proposer.update import plan_proposer_update

    embedded = preset("embedded")
    assert (embedded["proposals"], embedded["proposer_group_size"]) == (2, 2)
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    ctx = FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        # The embedded preset's proposals: two attempts on one brief (one proposer GRPO group).
        proposals=embedded["proposals"],
        proposer_group_size=embedded["proposer_group_size"],
        arm="terminal",
        policy_model=register("proposer-group-policy", two_proposers()),
        seed_dir=str(seed),
        base_model=str(tiny_model),
        max_revisions=0,
        proposer_max_turns=4,
        solver_max_turns=2,
        baseline_tasks=0,
        calibration_rollouts=2,
        refresh_attempts=1,
        refresh_limit=1,
        train_steps=1,
        num_generations=2,
        train_tasks_per_step=1,
        proposer_train_steps=1,
    )
    graph = build_flywheel(checkpointer=InMemorySaver())
    final = await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 500}, context=ctx
    )
    run = RunDir(tmp_path / "run")

    # Two attempts on one brief: one group, whose rewards differ (admitted vs oracle-rejected).
    with RolloutStore(run.rollouts) as store:
        proposer = [a for a in store.list_attempts(limit=1000) if a.role == "proposer"]
    assert sorted(a.reward for a in proposer) == [-1.0, 1.0]
    assert {a.metadata["temperature"] for a in proposer} == {0.7}
    plan = plan_proposer_update(run.rollouts, rounds=[1], policy_version="base")
    assert (len(plan.groups), plan.group_size, plan.dropped) == (1, 2, [])

    metrics = json.loads((run.root / "reports" / "metrics.json").read_text())[0]
    summary = metrics["training"]["proposer"]  # the round report's training section
    assert summary["start"] == "base" and sorted(summary["rewards"][0]) == [-1.0, 1.0]
    assert summary["steps"] == 1 and summary["param_change_l2"] > 0, summary
    assert summary["schedule"] == {
        "groups_per_step": 1,
        "steps_per_generation": 1,
        "num_iterations": 1,
    }
    # Both episodes counted against the completion length, the longest episode by default:
    # none cut, so nothing warns (a cut would: tests/test_round_report_activity.py).
    cut = summary["truncation"]
    assert (cut["episodes"], cut["truncated"], cut["model_tokens_cut"]) == (2, 0, 0), cut
    assert metrics["proposer_truncation"] == cut
    assert not any(w.startswith("proposer GRPO: ") for w in metrics["warnings"]), metrics
    registry = CheckpointRegistry(run.checkpoints)
    checkpoint = registry.get(summary["checkpoint"])
    assert checkpoint.parent_id is None  # it started from the policy that sampled (the base)
    # A fresh LoRA adapter starts with every B matrix at zero: the update moved them.
    weights = load_file(str(next(Path(checkpoint.path).rglob("adapter_model.safetensors"))))
    moved = sum(float(t.abs().sum()) for name, t in weights.items() if "lora_B" in name)
    assert moved > 0, "the proposer's GRPO step left the adapter at its initialisation"

    # The solver's GRPO step started from the proposer's checkpoint, not from the base.
    solver_job = json.loads((run.root / "train" / "r01" / "job.json").read_text())
    assert solver_job["parent"]["id"] == checkpoint.id
    lineage = run.manifest().policy_lineage
    assert {"role": "proposer", "checkpoint": checkpoint.id, "parent": None}.items() <= lineage[
        0
    ].items()
    report = (run.root / "reports" / "round-01.md").read_text()
    assert checkpoint.id in report

    # The same episodes are off-policy for the new checkpoint: an update from it trains nothing.
    later = final["policy"].model_copy(
        update={"checkpoint_id": checkpoint.id, "version": checkpoint.id}
    )
    again, published = await train_proposer(ctx, run, {**final, "round": 1}, later)
    assert published is None and "off-policy" in str(again["excluded"])


def test_a_foreign_proposer_model_is_refused_with_the_reason(tmp_path: Path) -> None:
    """`--proposer-model` other than the policy: no worker starts, and the round report's
    training section says why; the proposer model that is the policy trains as usual."""
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.state import TrainingSummary
    from autoenvscaling.graphs.flywheel.training import train_proposer
    from autoenvscaling.graphs.models import Policy
    from autoenvscaling.tools.report.metrics import RoundMetrics
    from autoenvscaling.tools.report.run_report import round_markdown
    from autoenvscaling.tools.run_dir import RunDir

    run = RunDir(tmp_path / "run")
    run.create({})
    policy = Policy(model="openai:policy")
    ctx = FlywheelContext(
        run_dir=str(run.root),
        base_model="unused: no worker may start",
        proposer_model="openai:frontier-proposer",
    )
    summary, checkpoint = asyncio.run(
        train_proposer(ctx, run, {"round": 1, "run_id": "run"}, policy)
    )
    assert checkpoint is None and not (run.root / "train").exists()
    assert "openai:frontier-proposer" in summary["reason"] and "refused" in summary["reason"]
    assert "another model's samples" in summary["reason"]
    report = round_markdown(
        RoundMetrics(round=1, training=TrainingSummary(proposer=summary).report())
    )
    assert "refused" in report and "openai:frontier-proposer" in report

    # Another endpoint serving "the same" name is not the policy's server either.
    elsewhere = ctx.model_copy(
        update={"proposer_model": None, "proposer_base_url": "http://other:8000/v1"}
    )
    summary, _ = asyncio.run(train_proposer(elsewhere, run, {"round": 1, "run_id": "run"}, policy))
    assert "not by the policy's server" in summary["reason"]

    # The policy named as the proposer is the policy: planning goes on (here: nothing recorded).
    from autoenvscaling.tools.rollouts.store import RolloutStore

    RolloutStore(run.rollouts).close()
    same = ctx.model_copy(update={"proposer_model": "openai:policy"})
    summary, _ = asyncio.run(train_proposer(same, run, {"round": 1, "run_id": "run"}, policy))
    assert "refused" not in summary["reason"] and "no proposer attempts" in summary["reason"]
