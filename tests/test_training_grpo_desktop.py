"""A real GRPO job (tiny local model, CPU, podman) mixing a computer-use task with a terminal
task: TRL's dict environment_factory runs each row in its own kind of episode (the computer-use
task's in a DesktopTaskEpisode, the terminal task's in a TaskEpisode), every episode is verified,
and the job budgets the longest prompt with each row's own tools. The model is random: whether a
policy's desktop calls reach the episode's tools is tests/test_grpo_desktop.py's (TRL calls the
methods by name)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import shutil
from pathlib import Path

import pytest

from autoenvscaling.training.backend import TrainHyperParams, TrainJob
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend
from tests.test_training_support import TASKS, make_tasks

pytestmark = [
    pytest.mark.train,
    pytest.mark.timeout(900),
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]
SHORT_PROMPT = "Solve the task with the tools."


def test_a_mixed_job_gives_the_computer_use_task_the_desktop_tools(engine_ready, tmp_path):
    import torch
    from transformers import AutoTokenizer

    from autoenvscaling.training.grpo.desktop_episode import DesktopTaskEpisode
    from autoenvscaling.training.grpo.episode_env import TaskEpisode, episode_prompt, prompt_tools
    from tests.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    tasks = make_tasks(tmp_path / "tasks")
    desktop = tmp_path / "tasks" / "look-then-write"
    shutil.copytree(tasks["write-numbers"], desktop)
    toml = desktop / "task.toml"
    toml.write_text(
        toml.read_text().replace("[metadata]\n", '[metadata]\ntags = ["computer-use"]\n')
    )
    model = build_tiny_model(tmp_path / "model")  # random: the routing needs no skill
    job = TrainJob(
        job_id="job-desktop",
        base_model=str(model),
        task_dirs=[desktop],
        replay_task_dirs=[tasks["hello-file"]],
        work_dir=tmp_path / "work",
        hyper=TrainHyperParams(
            steps=1,
            num_generations=2,
            tasks_per_step=2,
            max_completion_length=96,
            max_turns=2,
            max_reply_tokens=48,
            temperature=0.7,
            seed=0,
            torch_threads=1,
        ),
        system_prompt=SHORT_PROMPT,
    )
    registry = CheckpointRegistry(tmp_path / "registry")
    result = asyncio.run(TRLGRPOBackend(registry).train(job, lambda _: None))
    assert result.steps_done == 1, result
    episodes = json.loads((job.work_dir / "result.json").read_text())["episodes"]
    by_task: dict[str, list[dict]] = {}
    for record in episodes:
        by_task.setdefault(Path(record["task_dir"]).name, []).append(record)
    assert sorted(by_task) == ["hello-file", "look-then-write"], by_task
    assert all(r["fault"] is None and r["reward"] is not None for r in episodes), episodes
    # TRL's dict environment_factory ran each row in its own kind of episode.
    assert {r["environment"] for r in by_task["look-then-write"]} == {"desktop"}, episodes
    assert {r["environment"] for r in by_task["hello-file"]} == {"terminal"}, episodes
    assert all(r["actions"] == [] for r in by_task["hello-file"])  # no desktop on a terminal task
    # The job budgets its longest prompt as TRL renders each row: the desktop row, seven tools.
    tokenizer = AutoTokenizer.from_pretrained(model)

    def tokens(task: str, episode: type) -> int:
        prompt = episode_prompt(TASKS[task][0], SHORT_PROMPT)
        rendered = tokenizer.apply_chat_template(
            prompt, tools=prompt_tools(episode), add_generation_prompt=True, tokenize=True
        )
        return len(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)

    longest = result.metrics["episode"]["longest_prompt_tokens"]
    assert longest == tokens("write-numbers", DesktopTaskEpisode), result.metrics["episode"]
    assert longest > tokens("write-numbers", TaskEpisode) + 300
