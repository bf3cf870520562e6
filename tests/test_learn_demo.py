"""The learning demonstration end to end at a small size: the `learn` preset's flywheel over 2
training and 2 held-out variants, 1 round of 1 GRPO step, then the curve.

Real: the flywheel graph, podman sandboxes and verifiers, the rollout store, the TRL GRPO worker
(a tiny random model for the training side: the served policy is SmolLM2 in the real run) and
the reports. Scripted: the served policy's replies (it runs one held-out task's reference command
and fails the other, so every held-out point is 1 of 2). Nothing here asserts that the policy
learned (noise could produce a gain at this size); what it asserts is deterministic: the prompts
the served solver was evaluated on are the held-out tasks' instructions, and only those; the
verifier rewards of the training episodes are the ones TRL logged; curve.json has a point per
evaluation, with the Wilson interval of its counts."""

from __future__ import annotations

import importlib.util
import json
import shutil
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.config import REPO_TASKS, FlywheelContext, given_over_preset
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.tools.report.curve import CURVE_PNG, Curve, write_curve
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.stats import wilson
from autoenvscaling.tools.tasks.splits import task_folders
from autoenvscaling.training.worker_protocol import LOG_FILE, RESULT_FILE, parse_event

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]

GENERATED = REPO_TASKS / "generated"
SAMPLES = 1  # held-out samples per task per point
GENERATIONS = 2


def instruction(task: Path) -> str:
    return (task / "instruction.md").read_text().strip()


def solve_command(task: Path) -> str:
    """The reference solution's one command (the generator writes `#!/bin/bash` + one line)."""
    return (task / "solution" / "solve.sh").read_text().splitlines()[1]


def scripted_solver(solved: Path, served: list[str]):
    """The served policy: records each solver episode's task prompt; runs `solved`'s reference
    command when that is the task, `ls` otherwise; then stops."""
    target = instruction(solved)

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        system = str(messages[0].content) if isinstance(messages[0], SystemMessage) else ""
        assert "skilled terminal agent" in system, "only the solver is served in a learn run"
        if any(isinstance(m, AIMessage) for m in messages):
            return "Done."
        prompt = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        served.append(prompt)
        command = solve_command(solved) if target in prompt else "ls"
        return reply("", tool_call("run", command=command))

    return respond


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny Qwen2 (no warm-up): it trains for real, its rewards are whatever it earns.
    Positions for the full solver prompt, which its small vocabulary spells in many tokens."""
    from tests.tiny_model import TinyModelSpec, build_tiny_model

    return build_tiny_model(
        tmp_path_factory.mktemp("model") / "tiny",
        spec=TinyModelSpec(max_position_embeddings=8192),
    )


@pytest.mark.timeout(1500)
async def test_the_learn_demonstration_evaluates_heldout_trains_through_trl_and_draws_the_curve(
    engine_ready, tiny_model: Path, tmp_path: Path
):
    train_dir, heldout_dir = tmp_path / "train", tmp_path / "heldout"
    train = task_folders(GENERATED / "learn-train")[:2]
    heldout = task_folders(GENERATED / "learn-heldout")[:2]
    for folder, tasks in ((train_dir, train), (heldout_dir, heldout)):
        for task in tasks:
            shutil.copytree(task, folder / task.name)
    served: list[str] = []
    run = tmp_path / "run"
    values = given_over_preset(
        {
            "run_dir": str(run),
            "rounds": 1,
            "policy_model": register("learn-demo", scripted_solver(heldout[0], served)),
            "policy_server": "none",  # scripted: nothing to start or swap
            "seed_dir": str(train_dir),
            "heldout_dir": str(heldout_dir),
            "heldout_samples": SAMPLES,
            "train_steps": 1,
            "num_generations": GENERATIONS,
            "base_model": str(tiny_model),
            "max_tokens": 24,  # the tiny model's replies: short, they only need to be scored
            "solver_max_turns": 1,
        },
        "learn",
    )
    ctx = FlywheelContext.from_values(values)
    assert ctx.proposals == 0 and not ctx.proposer_training and ctx.refresh_attempts == 0
    graph = build_flywheel(checkpointer=InMemorySaver())
    await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "learn"}, "recursion_limit": 500}, context=ctx
    )

    # The served solver saw exactly the held-out tasks: k samples each, before and after round 1.
    prompts = [[t.name for t in heldout if instruction(t) in p] for p in served]
    assert all(len(names) == 1 for names in prompts), served
    assert Counter(n for names in prompts for n in names) == {t.name: SAMPLES * 2 for t in heldout}
    assert not any(instruction(t) in p for t in train for p in served)
    with RolloutStore(run / "rollouts.db") as store:
        attempts = store.list_attempts(role="solver", limit=10_000)
    assert {a.metadata.get("purpose") for a in attempts} == {"heldout"}
    assert sorted(a.round for a in attempts) == [0] * 2 * SAMPLES + [1] * 2 * SAMPLES

    # The training episodes' verifier rewards are what TRL logged for the step.
    result = json.loads((run / "train" / "r01" / RESULT_FILE).read_text())
    episodes = result["episodes"]
    assert len(episodes) == GENERATIONS  # 1 step x 1 task x the group
    assert {Path(e["task_dir"]).name for e in episodes} <= {t.name for t in train}
    rewards = [e["reward"] for e in episodes]
    assert all(r in (0.0, 1.0) for r in rewards), rewards
    logged = [h for h in result["metrics"]["log_history"] if "reward" in h]
    assert len(logged) == 1 and logged[0]["reward"] == pytest.approx(statistics.fmean(rewards))
    # TRL's own per-function log: its reward is our verifier function's, by name.
    assert logged[0]["rewards/verifier_reward/mean"] == pytest.approx(statistics.fmean(rewards))
    log = (run / "train" / "r01" / LOG_FILE).read_text().splitlines()
    events = [e for line in log if (e := parse_event(line)) is not None]
    assert [e.metrics["rewards"] for e in events if e.stage == "rewards"] == [rewards]

    metrics = json.loads((run / "reports" / "metrics.json").read_text())
    assert metrics[0]["training"]["reward_mean"] == pytest.approx(statistics.fmean(rewards))

    # The curve: a point per held-out evaluation (before round 1, after it), each 1 of 2 (the
    # scripted solver solves one of the two tasks), with Wilson's interval of those counts.
    data, png = write_curve(run)
    curve = Curve.model_validate_json(data.read_text())
    assert [(p.point, p.when, p.steps) for p in curve.points] == [
        (0, "before round 1", 0),
        (1, "after round 1", 1),
    ]
    low, high = wilson(1, 2)
    for p in curve.points:
        assert (p.tasks, p.samples, p.successes) == (2, 2 * SAMPLES, 1 * SAMPLES)
        assert (p.interval_low, p.interval_high) == (
            pytest.approx(low, abs=1e-4),
            pytest.approx(high, abs=1e-4),
        )
    assert curve.difference is not None and curve.difference.difference == 0.0
    assert not curve.difference.excludes_zero
    [round_] = curve.rounds
    assert round_.steps == 1 and {"train", "heldout", "heldout_before"} <= set(round_.stage_seconds)
    assert png.name == CURVE_PNG and png.stat().st_size > 0
