"""Proposer training: recorded proposer attempts, grouped by brief, trained with TRL GRPO.

The store and the transcripts are real (SQLite, files written by the same code the proposer uses);
the conversations stand in for proposer episodes. The update is TRL's GRPOTrainer in the worker
subprocess with `rollout_func` handing back the recorded conversations: varying gate rewards
change the weights, constant rewards are skipped with the reason, and an infrastructure error
(reward None) never enters a group.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import pytest

from autoenvscaling.tools.rollouts.models import Attempt
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.rollouts.transcripts import Transcript, save_transcript
from autoenvscaling.training.proposer.update import plan_proposer_update

needs_train = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
    reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
)
SYSTEM = "You write Harbor tasks. Use the tools; submit when done."
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"The {name} tool.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
            },
        },
    }
    for name in ("write_file", "submit")
]


def _conversation(brief: str, content: str) -> list[dict]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": brief},
        {
            "role": "assistant",
            "content": "Writing the instruction.",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "write_file",
                        "arguments": {"path": "instruction.md", "content": content},
                    },
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "TOOL-OUTPUT wrote 1 file"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {"id": "c2", "type": "function", "function": {"name": "submit", "arguments": {}}}
            ],
        },
        {"role": "tool", "tool_call_id": "c2", "content": "TOOL-OUTPUT submitted"},
    ]


def _record(
    store_path: Path,
    attempts: list[tuple[str, str, float | None, str]],
    *,
    round_: int = 1,
    transcripts: bool = True,
    policy_version: str = "base",
    metadata: dict | None = None,
) -> None:
    """attempts: (id, brief, reward, outcome), sampled by `policy_version`."""
    with RolloutStore(store_path) as store:
        for attempt_id, brief, reward, outcome in attempts:
            store.record_attempt(
                Attempt(
                    id=attempt_id,
                    run_id="run",
                    round=round_,
                    role="proposer",
                    task_id=f"cand-{attempt_id}",
                    policy_version=policy_version,
                    metadata=metadata or {},
                    reward=reward,
                    outcome=outcome,  # type: ignore[arg-type]
                    error="model endpoint unreachable" if outcome == "error" else None,
                )
            )
            if transcripts:
                save_transcript(
                    store_path,
                    Transcript(
                        attempt_id=attempt_id,
                        messages=_conversation(brief, f"Task by {attempt_id}: sum numbers."),
                        tools=TOOLS,
                    ),
                )


def test_groups_by_brief_exclude_infrastructure_errors_and_flat_groups(tmp_path: Path) -> None:
    store = tmp_path / "rollouts.db"
    _record(
        store,
        [
            ("a1", "brief A", 1.0, "solved"),
            ("a2", "brief A", -1.0, "failed"),
            ("a3", "brief A", None, "error"),  # infrastructure: never in a group
            ("b1", "brief B", -1.0, "failed"),
            ("b2", "brief B", -1.0, "failed"),
            ("c1", "brief C", -0.25, "failed"),
        ],
    )
    _record(store, [("old", "brief A", 1.0, "solved")], round_=0)
    plan = plan_proposer_update(store, rounds=[1], run_id="run")
    assert [[s.attempt_id for s in g.samples] for g in plan.groups] == [["a1", "a2"]]
    assert plan.groups[0].rewards == [1.0, -1.0] and plan.group_size == 2
    assert plan.groups[0].prompt == _conversation("brief A", "")[:2]
    assert "infrastructure error" in plan.excluded["a3"]
    assert all(s.attempt_id != "a3" for g in plan.groups for s in g.samples)
    reasons = {tuple(d.attempts): d.reason for d in plan.dropped}
    assert "zero advantage" in reasons[("b1", "b2")]
    assert "single valid proposal" in reasons[("c1",)]
    assert plan.reason is None


def test_set_aside_replies_are_samples_of_their_attempts_group(tmp_path: Path) -> None:
    """What was served is what is trained: a reply set aside before the first file (prose) is a
    sample of its own in its brief's group, the conversation it answered then the reply, at the
    fixed -1 of an attempt that ends without a task, whatever the attempt it was part of scored.
    One attempt with a set-aside reply is a group by itself: prose against the reply that went
    on."""
    from autoenvscaling.training.proposer.update import SET_ASIDE_REWARD

    store = tmp_path / "rollouts.db"
    prose = {"role": "assistant", "content": "I would be happy to write the task."}
    later = {"role": "assistant", "content": "Here is my plan."}  # after a tool call
    asides = [{"at": 2, "message": prose}, {"at": 4, "message": later}]
    _record(store, [("a1", "brief A", 1.0, "solved")], metadata={"set_aside_replies": asides})
    _record(store, [("a2", "brief A", 1.0, "solved")])
    plan = plan_proposer_update(store, rounds=[1])
    assert SET_ASIDE_REWARD == -1.0
    [group] = plan.groups
    assert [s.attempt_id for s in group.samples][:3] == ["a1", "a1#set-aside-1", "a1#set-aside-2"]
    assert plan.set_aside_samples == 2 and plan.summary()["set_aside_samples"] == 2
    first, second = group.samples[1], group.samples[2]
    assert (first.reward, second.reward) == (-1.0, -1.0)
    conversation = _conversation("brief A", "Task by a1: sum numbers.")
    assert first.messages == [*conversation[:2], prose]  # the prompt it was served, then prose
    assert second.messages == [*conversation[:4], later]  # after the write_file call's result
    # A record that does not fit its transcript leaves the attempt out, with why.
    _record(
        store,
        [("a3", "brief A", 1.0, "solved")],
        metadata={"set_aside_replies": [{"at": 99, "message": prose}]},
    )
    assert "disagree" in plan_proposer_update(store, rounds=[1]).excluded["a3"]


def test_an_autosubmitted_proposal_is_trained_below_the_same_verdict_by_submit(
    tmp_path: Path,
) -> None:
    """`submit` is taught: an autosubmitted proposal earns the gate's reward less 0.25, floored
    at -1 (writing a rejected task never scores below writing nothing)."""
    from autoenvscaling.training.proposer.update import AUTOSUBMIT_PENALTY, trained_reward

    assert AUTOSUBMIT_PENALTY == 0.25
    assert [trained_reward(r, True) for r in (1.0, -0.25, -1.0)] == [0.75, -0.5, -1.0]
    assert [trained_reward(r, False) for r in (1.0, -0.25, -1.0)] == [1.0, -0.25, -1.0]
    store = tmp_path / "rollouts.db"
    _record(store, [("s1", "brief A", 1.0, "solved")], metadata={"autosubmitted": False})
    _record(store, [("u1", "brief A", 1.0, "solved")], metadata={"autosubmitted": True})
    plan = plan_proposer_update(store, rounds=[1])
    [group] = plan.groups  # both admitted: a gradient only because one never called submit
    assert [(s.attempt_id, s.reward, s.autosubmitted) for s in group.samples] == [
        ("s1", 1.0, False),
        ("u1", 0.75, True),
    ]
    assert plan.summary()["autosubmitted"] == 1


def test_the_graded_arm_credits_each_working_stage_a_rejected_task_reached(
    tmp_path: Path,
) -> None:
    """Two rejections the gate scores alike (-1) teach nothing under its reward; graded, a task
    that failed at its oracle (it parsed and built) scores above one that failed lint, which
    scores above no task, the
    admission's stage over the proposer's own gate run's. Admission, out of the band and a copy
    keep the gate's reward; every rejection stays below out of the band."""
    from autoenvscaling.training.proposer.update import GRADED_STEP, graded_reward, trained_reward

    store = tmp_path / "rollouts.db"
    _record(store, [("lint", "brief A", -1.0, "failed")], metadata={"stage": "lint"})
    # The proposer's own run passed lint; the admission rejected it at its oracle.
    meta = {"stage": None, "admission_stage": "oracle"}
    _record(store, [("oracle", "brief A", -1.0, "failed")], metadata=meta)
    _record(store, [("none", "brief A", -1.0, "failed")])  # never submitted: no stage
    # Submitted with nothing written: rejected at lint, graded as no task.
    _record(
        store, [("empty", "brief A", -1.0, "failed")], metadata={"stage": "lint", "task_files": []}
    )
    gate = plan_proposer_update(store, rounds=[1], run_id="run")
    assert not gate.groups and "zero advantage" in gate.dropped[0].reason
    graded = plan_proposer_update(store, rounds=[1], run_id="run", arm="graded")
    assert [s.attempt_id for s in graded.groups[0].samples] == ["lint", "oracle", "none", "empty"]
    assert graded.groups[0].rewards == [-1.0 + GRADED_STEP, -1.0 + 3 * GRADED_STEP, -1.0, -1.0]
    assert graded.summary()["reward_arm"] == "graded" and gate.summary()["reward_arm"] == "gate"
    assert graded_reward(1.0, None) == 1.0 and graded_reward(-0.25, "calibrate") == -0.25
    assert graded_reward(-1.0, "dedup") == -1.0  # a copy earns nothing
    assert graded_reward(-1.0, "anti_cheat") < -0.25
    # Lint's step is scaled by the task files written: an empty folder submitted is no task.
    assert graded_reward(-1.0, "lint", 0) == -1.0
    assert graded_reward(-1.0, "lint", 2) == pytest.approx(-1.0 + 0.4 * GRADED_STEP)
    assert graded_reward(-1.0, "build", 0) == -1.0 + 2 * GRADED_STEP  # it built: it had files
    # Autosubmitted, the graded arm loses half a file's credit: one file still beats no task.
    assert trained_reward(graded_reward(-1.0, "lint", 1), True, "graded") > -1.0
    assert -1.0 < trained_reward(graded_reward(-1.0, "lint"), True, "graded") < -1.0 + GRADED_STEP
    assert trained_reward(graded_reward(-1.0, "lint"), True, "gate") == -1.0


def test_only_the_starting_policys_own_samples_enter_a_group(tmp_path: Path) -> None:
    """On-policy: attempts an earlier checkpoint or another model sampled stay out, with why."""
    store = tmp_path / "rollouts.db"
    mine = {"model": "openai:policy", "temperature": 0.7}
    _record(
        store, [("a1", "brief A", 1.0, "solved"), ("a2", "brief A", -1.0, "failed")], metadata=mine
    )
    _record(store, [("old", "brief A", -0.25, "failed")], policy_version="ck-0", metadata=mine)
    _record(
        store,
        [("ext", "brief A", 1.0, "solved")],
        metadata={"model": "openai:frontier", "temperature": 0.7},
    )
    _record(
        store,
        [("hot", "brief A", -1.0, "failed")],
        metadata={"model": "openai:policy", "temperature": 1.0},
    )
    plan = plan_proposer_update(store, rounds=[1], policy_version="base", model="openai:policy")
    assert [[s.attempt_id for s in g.samples] for g in plan.groups] == [["a1", "a2"]]
    assert plan.temperature == 0.7
    assert "sampled by policy ck-0" in plan.excluded["old"] and "off-policy" in plan.excluded["old"]
    assert "written by openai:frontier" in plan.excluded["ext"]
    assert "temperature 1" in plan.excluded["hot"]


def test_one_generation_holds_every_group_and_later_steps_reuse_it() -> None:
    from autoenvscaling.training.backend import TrainHyperParams
    from autoenvscaling.training.proposer.update import ProposerGroup, ProposerJob, ProposerSample

    def job(groups: int, per_step: int, steps: int) -> ProposerJob:
        samples = [ProposerSample(attempt_id=f"a{i}", reward=float(i), messages=[]) for i in (0, 1)]
        return ProposerJob(
            job_id="j",
            base_model="m",
            groups=[ProposerGroup(key=f"k{i}", prompt=[], samples=samples) for i in range(groups)],
            group_size=2,
            groups_per_step=per_step,
            hyper=TrainHyperParams(steps=steps),
            work_dir=Path("unused"),
        )

    def shape(j: ProposerJob) -> tuple[int, int, int]:
        s = j.schedule()
        return s.groups_per_step, s.steps_per_generation, s.num_iterations

    assert shape(job(1, 2, 1)) == (1, 1, 1)  # the embedded round: one group, one step
    assert shape(job(1, 2, 3)) == (1, 1, 3)  # steps 2-3 clipped against the first
    assert shape(job(4, 2, 2)) == (2, 2, 1)  # 4 groups: two steps over one generation
    assert shape(job(3, 2, 1)) == (1, 3, 1)  # 3 groups never make a batch of 2
    assert shape(job(4, 2, 5)) == (2, 2, 3)


def test_constant_rewards_are_skipped_with_the_reason(tmp_path: Path) -> None:
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.training import train_proposer
    from autoenvscaling.graphs.models import Policy
    from autoenvscaling.tools.run_dir import RunDir

    run = RunDir(tmp_path / "run")
    run.create({})
    _record(
        run.rollouts,
        [
            ("x1", "brief", -1.0, "failed"),
            ("x2", "brief", -1.0, "failed"),
            ("x3", "brief", None, "error"),
        ],
    )
    ctx = FlywheelContext(run_dir=str(run.root), base_model="unused: no worker may start")
    summary, policy = asyncio.run(
        train_proposer(ctx, run, {"round": 1, "run_id": "run"}, Policy(model="openai:policy"))
    )
    assert policy is None
    assert "all 2 proposals scored -1: zero advantage" in summary["reason"]
    assert "infrastructure error" in summary["excluded"]["x3"]
    assert not (run.root / "train").exists()  # no worker ran

    off = FlywheelContext(run_dir=str(run.root), base_model="x", proposer_training=False)
    summary, _ = asyncio.run(train_proposer(off, run, {"round": 1, "run_id": "run"}, Policy()))
    assert summary["reason"] == "proposer training is off for this run"
    later = FlywheelContext(run_dir=str(run.root), base_model="x", proposer_update_every=2)
    summary, _ = asyncio.run(train_proposer(later, run, {"round": 1, "run_id": "run"}, Policy()))
    assert "every 2 rounds" in summary["reason"]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from tests.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny")


@needs_train
def test_env_mask_covers_only_the_models_own_tokens(tiny_model: Path) -> None:
    from transformers import AutoTokenizer

    from autoenvscaling.training.proposer.worker import tokenize_conversation

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    messages = _conversation("brief A", "MODEL-WROTE-THIS")
    prompt_ids, completion, mask = tokenize_conversation(tokenizer, messages, TOOLS, 2)
    whole = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False)
    assert tokenizer.decode(prompt_ids + completion) == whole
    mine = tokenizer.decode([t for t, m in zip(completion, mask, strict=True) if m])
    other = tokenizer.decode([t for t, m in zip(completion, mask, strict=True) if not m])
    assert "MODEL-WROTE-THIS" in mine and '"name": "submit"' in mine
    assert mine.count(tokenizer.eos_token) == 2  # each reply ends with its end-of-turn token
    assert "TOOL-OUTPUT" in other and "TOOL-OUTPUT" not in mine


@needs_train
def test_an_episode_past_the_completion_length_is_counted_with_what_was_cut(
    tiny_model: Path,
) -> None:
    """The trainer cuts a conversation to `max_completion_tokens`: the count says which episodes
    and how many of the model's own tokens were left untrained (tool results do not count)."""
    from transformers import AutoTokenizer

    from autoenvscaling.tools.report.truncation import CompletionTruncation, EpisodeCut
    from autoenvscaling.training.proposer.worker import tokenize_conversation

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    _, completion, mask = tokenize_conversation(
        tokenizer, _conversation("brief A", "MODEL-WROTE-THIS"), TOOLS, 2
    )
    first_tool = mask.index(0)  # the cut falls in the tool result, after the first reply
    fits, cut = EpisodeCut.of(mask, len(mask)), EpisodeCut.of(mask, first_tool + 1)
    assert not fits.truncated and fits.model_tokens_cut == 0
    assert cut.truncated and cut.model_tokens == sum(mask) == fits.model_tokens
    second_reply = sum(mask[first_tool:])  # the submit call: the model's, past the cut
    assert cut.model_tokens_cut == second_reply > 0
    total = CompletionTruncation.of([fits, cut], first_tool + 1)
    assert (total.episodes, total.truncated, total.model_tokens_cut) == (2, 1, second_reply)
    assert total.shown().startswith(f"1 of 2 episode(s) cut to {first_tool + 1} completion tokens")


@needs_train
@pytest.mark.train
@pytest.mark.timeout(300)
def test_varying_rewards_change_the_weights(tiny_model: Path, tmp_path: Path) -> None:
    from autoenvscaling.training.backend import TrainHyperParams
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.proposer.update import ProposerJob, TRLProposerBackend

    store = tmp_path / "rollouts.db"
    _record(
        store,
        [
            ("a1", "brief A", 1.0, "solved"),
            ("a2", "brief A", -1.0, "failed"),
            ("a3", "brief A", None, "error"),
            ("b1", "brief B", -0.25, "failed"),
            ("b2", "brief B", 1.0, "solved"),
        ],
    )
    plan = plan_proposer_update(store, rounds=[1])
    assert len(plan.groups) == 2
    registry = CheckpointRegistry(tmp_path / "registry")
    job = ProposerJob(
        job_id="proposer-test",
        base_model=str(tiny_model),
        groups=plan.groups,
        group_size=plan.group_size,
        groups_per_step=2,
        work_dir=tmp_path / "work",
        hyper=TrainHyperParams(steps=2, learning_rate=5e-3, torch_threads=1),
    )
    result = asyncio.run(TRLProposerBackend(registry).train(job))
    assert result.checkpoint is not None, result.reason
    assert registry.current_id() == result.checkpoint.id
    assert result.steps_done == 2 and result.metrics["param_change_l2"] > 0
    # Learning measured by behaviour, as for the solver: rewarded proposals likelier after the
    # update, penalised ones less likely (the direction, not a size), and the probe moved.
    behaviour = result.behaviour
    assert behaviour is not None and behaviour.rewarded and behaviour.penalised, behaviour
    assert behaviour.rewarded.after > behaviour.rewarded.before, behaviour.line()
    assert behaviour.penalised.after < behaviour.penalised.before, behaviour.line()
    assert behaviour.probe_kl is not None and behaviour.probe_kl > 0
    import json

    worker = json.loads((tmp_path / "work" / "result.json").read_text())
    used = {e["attempt_id"]: e["reward"] for e in worker["episodes"]}
    assert used == {"a1": 1.0, "a2": -1.0, "b1": -0.25, "b2": 1.0}  # a3 never entered
    # One generation (each episode scored once); step 2 reused it against step 1's logprobs.
    assert len(worker["episodes"]) == 4
    assert worker["metrics"]["schedule"] == {
        "groups_per_step": 2,
        "steps_per_generation": 1,
        "num_iterations": 2,
    }
    assert worker["metrics"]["temperature"] == 0.7
    # The completion length is the longest episode (issue 39: the tail, `submit`, is trained):
    # counted, none cut (each once, not per pass).
    from transformers import AutoTokenizer

    from autoenvscaling.training.proposer.worker import tokenize_conversation

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    longest = max(
        len(tokenize_conversation(tokenizer, s.messages, g.tools, len(g.prompt))[2])
        for g in plan.groups
        for s in g.samples
    )
    cut = worker["metrics"]["truncation"]
    assert (cut["episodes"], cut["truncated"], cut["model_tokens_cut"]) == (4, 0, 0)
    assert cut["max_completion_tokens"] == longest and cut["model_tokens"] > 0


def test_a_real_proposer_attempt_leaves_its_transcript(tmp_path: Path) -> None:
    """`propose()` saves what the model saw (system prompt, brief) and said, next to the store."""
    from autoenvscaling.graphs.agent.scripted_model import register
    from autoenvscaling.graphs.models import ModelConfig
    from autoenvscaling.graphs.proposer.prompts import brief_prompt
    from autoenvscaling.graphs.proposer.record import propose
    from autoenvscaling.graphs.proposer.settings import ProposerSettings
    from autoenvscaling.tools.agents.brief import build_brief
    from autoenvscaling.tools.rollouts.transcripts import load_transcript
    from tests.conftest import SEED_DIR

    store = tmp_path / "rollouts.db"
    brief = build_brief(None, SEED_DIR)
    settings = ProposerSettings(
        model=ModelConfig(model=register("junk-proposer", ["no task here, sorry"])),
        arm="prompt_only",
        store_path=str(store),
        run_id="run",
        round=1,
    )
    result = asyncio.run(propose(brief, settings, out_dir=tmp_path / "cand"))
    assert result.reward == -1.0 and result.outcome == "failed"
    transcript = load_transcript(store, result.attempt_id)
    assert transcript is not None
    assert [m["role"] for m in transcript.messages] == ["system", "user", "assistant"]
    assert transcript.messages[1]["content"] == brief_prompt(brief)
    assert transcript.messages[2]["content"] == "no task here, sorry"
    # One attempt of its brief: the planner says why it cannot form a group.
    plan = plan_proposer_update(store, rounds=[1])
    assert "single valid proposal" in plan.dropped[0].reason and plan.reason


def test_run_modes_are_in_the_manifest_and_the_round_report(tmp_path: Path) -> None:
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.training import run_modes
    from autoenvscaling.tools.report.metrics import RoundMetrics
    from autoenvscaling.tools.report.run_report import round_markdown
    from autoenvscaling.tools.run_dir import RunDir

    ctx = FlywheelContext(run_dir=str(tmp_path / "run"), proposer_group_size=2)
    manifest = RunDir(tmp_path / "run").create(ctx.model_dump())
    assert (manifest.config["proposer_training"], manifest.config["cold_start"]) == (True, False)
    assert manifest.config["proposer_update_every"] == 1
    modes = run_modes(ctx)
    assert modes == (
        "proposer training on (every 1 round(s), groups of 2; from the checkpoint that sampled, "
        "no sampler-logprob correction); cold start off"
    )
    foreign = FlywheelContext(proposer_model="openai:frontier")
    assert run_modes(foreign).startswith("proposer training refused (openai:frontier proposes")
    off = FlywheelContext(proposer_training=False, cold_start=True, policy_checkpoint_id="ck-1")
    assert run_modes(off) == "proposer training off; cold start on (ck-1)"
    report = round_markdown(RoundMetrics(round=1, training={"run_modes": modes}))
    assert f"- run_modes: {modes}" in report
