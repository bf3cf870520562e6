"""Supervised fine-tuning (cold start) as a training job: TRL's SFTTrainer in a worker subprocess.

`TRLSFTBackend` runs `training/sft/worker.py` as a `WorkerBackend`, as the GRPO backend runs its
worker (same subprocess, progress events, kill-on-timeout, and publication through the checkpoint
registry only after a clean exit), so a cold-start checkpoint is published, made current and
swapped in for both roles like any other. Import-light: no torch in the graph or CLI process.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ..backend import TrainJob
from ..worker_backend import WorkerBackend


class SFTJob(TrainJob):
    """A job over an SFT dataset (sft-data's output) instead of Harbor tasks.

    `hyper.steps` is the number of optimizer steps; `hyper.lora` chooses LoRA or full weights.
    """

    task_dirs: list[Path] = Field(default_factory=list, description="Unused by SFT.")
    dataset: Path = Field(description="A dataset folder (save_to_disk) or an sft.jsonl file.")
    batch_size: int = Field(default=2, ge=1, description="Examples per optimizer step.")
    max_length: int = Field(
        default=2048, ge=16, description="Token cap per example (longer ones are cut at the end)."
    )
    assistant_only_loss: bool = Field(
        default=True,
        description="Train only on the model's own turns, not on prompts or tool results.",
    )


class TRLSFTBackend(WorkerBackend):
    """TRL SFTTrainer in a child Python; publishes through the same registry path as GRPO."""

    worker_module = "autoenvscaling.training.sft.worker"
    worker_name = "SFT worker"
