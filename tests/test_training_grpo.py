"""GRPO for real on CPU: a tiny local model, 2 tasks in podman sandboxes, verifier rewards.

The model is random but warmed up (a few hundred next-token steps) to answer in the Qwen2.5
tool-call format with a mix of right, half-right and wrong commands, so episodes really call the
sandbox's bash tool and the partial-credit verifiers give rewards that vary within a group: GRPO
then has a gradient and the test can insist that the trained parameters changed.
"""

from __future__ import annotations

import importlib.util
import os
import signal
from pathlib import Path

import pytest

from autoenvscaling.training.backend import TrainHyperParams, TrainingError, TrainJob, TrainProgress
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend
from tests.test_training_support import TASKS, WARMUP_COMMANDS, make_tasks

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from autoenvscaling.training.grpo.episode_env import episode_prompt, prompt_tools
    from tests.tiny_model import build_tiny_model, tool_call_reply

    torch.set_num_threads(1)  # a tiny model on shared cores: one thread is several times faster

    examples = [
        (episode_prompt(TASKS[name][0], SHORT_PROMPT), tool_call_reply(command))
        for name, commands in WARMUP_COMMANDS.items()
        for command in commands
    ]
    return build_tiny_model(
        tmp_path_factory.mktemp("model") / "tiny",
        warmup_examples=examples,
        warmup_steps=120,
        warmup_tools=prompt_tools(),
    )


# A 2-layer random model cannot read past the full solver prompt; the job's system_prompt knob
# keeps its episodes short (the interface itself is checked in test_agent_interface.py).
SHORT_PROMPT = "Solve the task with the run tool."


def _job(tiny_model: Path, tmp_path: Path, **hyper) -> TrainJob:
    tasks = make_tasks(tmp_path / "tasks")
    params = {
        "steps": 2,
        "num_generations": 4,
        "tasks_per_step": 2,
        "max_completion_length": 96,
        "max_turns": 2,
        "max_reply_tokens": 40,
        "temperature": 1.0,  # the warm-up's mix of commands needs the spread to vary in a group
        "learning_rate": 5e-3,
        "seed": 0,
        "torch_threads": 1,
    }
    params.update(hyper)
    return TrainJob(
        job_id="job-test",
        base_model=str(tiny_model),
        task_dirs=[tasks["write-numbers"]],
        replay_task_dirs=[tasks["hello-file"]],
        work_dir=tmp_path / "work",
        hyper=TrainHyperParams(**params),
        system_prompt=SHORT_PROMPT,
    )


def _adapter_b_norm(weights: Path) -> float:
    from safetensors.torch import load_file

    tensors = load_file(str(weights / "adapter_model.safetensors"))
    return sum(float(t.float().norm()) for name, t in tensors.items() if "lora_B" in name)


@pytest.fixture(scope="module")
def trained(engine_ready, tiny_model, tmp_path_factory):
    """One real training job (2 steps, 2 tasks, LoRA), shared by the tests that inspect it."""
    import asyncio

    tmp_path = tmp_path_factory.mktemp("trained")
    registry = CheckpointRegistry(tmp_path / "registry")
    events: list[TrainProgress] = []
    result = asyncio.run(TRLGRPOBackend(registry).train(_job(tiny_model, tmp_path), events.append))
    return registry, result, events


async def test_two_grpo_steps_publish_a_checkpoint(trained, tiny_model) -> None:
    registry, result, events = trained
    assert result.steps_done == 2
    assert result.groups_total == 4  # 2 steps x 2 tasks
    assert result.groups_dropped_no_variance < result.groups_total, result.metrics
    ckpt = result.checkpoint
    assert ckpt is not None and result.reason is None
    assert registry.current_id() == ckpt.id
    assert (ckpt.kind, ckpt.parent_id, ckpt.job_id, ckpt.base_model) == (
        "lora",
        None,
        "job-test",
        str(tiny_model),
    )
    assert ckpt.metrics["groups_total"] == 4
    # The parameters changed: LoRA's B matrices start at zero, and the trainer measured the step.
    assert result.metrics["param_change_l2"] > 0
    assert _adapter_b_norm(ckpt.path) > 0
    # What the update did to behaviour, measured in the worker (training/grpo/behaviour.py):
    # every step's rewarded / penalised completions before and after it, the probe set's KL.
    behaviour = result.behaviour
    assert behaviour is not None and [s.step for s in behaviour.steps] == [1, 2]
    assert behaviour.rewarded is not None and behaviour.penalised is not None, behaviour
    assert behaviour.probe_kl is not None and behaviour.probe_kl > 0
    assert ckpt.metrics["behaviour"] == behaviour.model_dump()
    # Episodes really ran in sandboxes: the policy called bash, verifiers scored partial credit.
    rewards = [r for e in events if e.stage == "rewards" for r in e.metrics["rewards"]]
    assert len(rewards) == 16 and len(set(rewards)) > 1
    assert [e.step for e in events if e.stage == "step" and "loss" in e.metrics] == [1, 2]
    # Both steps at the job's learning rate: a round's steps do not decay (RL_LR_SCHEDULE).
    rates = [h["learning_rate"] for h in result.metrics["log_history"] if "loss" in h]
    assert rates == [5e-3, 5e-3], rates
    # The round's admitted task (write-numbers) leads every step; replay (hello-file) fills in.
    steps = [[Path(t).name for t in step] for step in result.metrics["step_tasks"]]
    assert steps == [["write-numbers", "hello-file"]] * 2
    assert not list(registry.staging_dir.iterdir())
    # TRL logged every step to TensorBoard in the job's folder; its mid-job checkpoints are gone.
    trainer = result.log_path.parent / "trainer"
    assert list(trainer.glob("runs/*/events.out.tfevents.*"))
    assert not list(trainer.glob("checkpoint-*"))
    # The episode TRL ran is the one the job asked for: the per-reply cap reached TRL's generation.
    episode = result.metrics["episode"]
    assert episode["max_completion_length"] == 96 and episode["max_tool_calling_iterations"] == 2
    assert episode["max_new_tokens"] == episode["trl_max_new_tokens"] == 40
    assert episode["temperature"] == 1.0 and episode["longest_prompt_tokens"] > 0

    # Swap: both roles read the same PolicyRef, which now names the new adapter.
    from autoenvscaling.training.serving.vllm_server import VLLMPolicyServer
    from tests.test_training_vllm_contract import FakeVLLM, Served, _ask

    with Served(FakeVLLM(runtime_lora=True, dev_mode=False)) as srv:
        ref = await VLLMPolicyServer(srv.base_url, "tiny-base").activate(registry.current())
        proposer, solver = ref, ref
        assert proposer.model == solver.model == ckpt.id
        assert _ask(solver) == f"weights={ckpt.path}"


def test_cli_full_finetune_continues_from_current(trained, tiny_model, tmp_path) -> None:
    """`autoenvscaling train --full` on the registry above: merges the LoRA parent, trains all
    weights, publishes a full checkpoint whose lineage leads back to the adapter."""
    import json
    import subprocess
    import sys

    registry, first, _ = trained
    tasks = make_tasks(tmp_path / "tasks")
    cmd = [
        sys.executable,
        "-m",
        "autoenvscaling.cli.main",
        "train",
        "--tasks",
        str(tmp_path / "tasks"),
        "--base",
        str(tiny_model),
        "--registry",
        str(registry.root),
        "--full",
        "--steps",
        "2",
        "--num-generations",
        "4",
        "--max-completion-length",
        "96",
        "--max-turns",
        "2",
        "--lr",
        "1e-3",
        "--threads",
        "1",
        "--work-dir",
        str(tmp_path / "work"),
        "--json",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout)
    assert result["groups_total"] == 4 and len(tasks) == 2
    if result["checkpoint"] is None:  # honest "no update" is allowed, but must say why
        assert "no reward variance" in result["reason"]
        assert registry.current_id() == first.checkpoint.id
        return
    ckpt = registry.current()
    assert ckpt.id == result["checkpoint"]["id"] and ckpt.kind == "full"
    assert ckpt.parent_id == first.checkpoint.id and first.checkpoint.parent_id is None
    assert (ckpt.path / "config.json").is_file() and (ckpt.path / "tokenizer.json").is_file()
    assert result["metrics"]["param_change_l2"] > 0


async def test_killed_worker_leaves_previous_checkpoint_current(
    engine_ready, tiny_model, tmp_path
) -> None:
    registry = CheckpointRegistry(tmp_path / "registry")
    previous_dir = tmp_path / "previous"
    previous_dir.mkdir()
    (previous_dir / "adapter_config.json").write_text("{}")
    previous = registry.publish(previous_dir, base_model=str(tiny_model), kind="lora")
    backend = TRLGRPOBackend(registry)
    killed: list[int] = []

    def kill_mid_training(event: TrainProgress) -> None:
        # After the first batch is verified the worker is mid-step: kill it like an OOM would.
        if event.stage == "rewards" and not killed and backend.worker_pid is not None:
            killed.append(backend.worker_pid)
            os.killpg(backend.worker_pid, signal.SIGKILL)

    with pytest.raises(TrainingError, match="killed by signal 9"):
        await backend.train(_job(tiny_model, tmp_path, steps=3), kill_mid_training)
    assert killed
    fresh = CheckpointRegistry(tmp_path / "registry")
    assert fresh.current_id() == previous.id
    assert [c.id for c in fresh.list()] == [previous.id]
    assert not (tmp_path / "work" / "result.json").exists()


async def test_failing_worker_reports_why(tiny_model, tmp_path) -> None:
    registry = CheckpointRegistry(tmp_path / "registry")
    job = _job(tiny_model, tmp_path).model_copy(update={"base_model": str(tmp_path / "no-model")})
    with pytest.raises(TrainingError) as err:
        await TRLGRPOBackend(registry).train(job)
    text = str(err.value)
    assert "exited with code 1" in text and "no-model" in text and "worker.log" in text
    assert registry.current() is None and registry.list() == []


def test_chatml_template_without_tools_gets_a_tool_template(tiny_model) -> None:
    """The embedded default (SmolLM2) ships a ChatML template without tools: the worker swaps in
    TRL's Qwen2.5 ChatML template so tool calls render and parse; a known one is kept."""
    from transformers import AutoTokenizer
    from trl.chat_template_utils import qwen2_5_chat_template

    from autoenvscaling.training.policy_loading import ensure_tool_template

    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    assert ensure_tool_template(tokenizer) is None  # already Qwen2.5: kept
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    assert "Qwen2.5" in ensure_tool_template(tokenizer)
    assert tokenizer.chat_template == qwen2_5_chat_template
    reply = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call><|im_end|>'
    parsed = tokenizer.parse_response(reply, prefix="")
    assert parsed["tool_calls"][0]["function"]["arguments"] == {"command": "ls"}
