"""What every trainer process does around its TRL trainer (the GRPO, SFT and proposer workers).

Each worker builds its own TRL config (`trl_config`): the defaults every job shares, the worker's
own, then the job's `hyper.trl_config`, which may set any field of that class (`start_job` checks
the names before any weights load). Shared defaults: a log entry every step to TensorBoard in the
job's folder (`work_dir/trainer/runs/`; W&B too when WANDB_PROJECT is set), and a checkpoint every
tenth of the job (`work_dir/trainer/checkpoint-N`, the last one kept). A job whose worker was
killed resumes from its last complete checkpoint when run again unchanged (`train`); a checkpoint
of another job is dropped at start, and a finished job's once training returns.

Several processes (`accelerate launch`, one rank each): every rank builds the same trainer and
trains its share of each batch; the trainer folder's files (job stamp, checkpoints) and the
weights are written by rank 0 alone, the weights gathered from every rank first (a no-op for
DDP, the shards for ZeRO-3 / FSDP).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import os
import shutil
from pathlib import Path
from typing import Any

from .backend import TrainJob
from .policy_loading import device_of
from .worker_protocol import (
    WEIGHTS_DIR,
    WorkerResult,
    emit,
    process_rank,
)


def trainer_dir(job: TrainJob) -> Path:
    """TRL's output_dir: checkpoints and TensorBoard runs, inside the job's folder."""
    return Path(job.hyper.trl_config.get("output_dir") or Path(job.work_dir) / "trainer")


def start_job(job: TrainJob, config_type: type) -> str:
    """What every worker does first; returns the device."""
    import torch

    fields = [f.name for f in dataclasses.fields(config_type) if f.init]
    for name in set(job.hyper.trl_config) - set(fields):
        close = difflib.get_close_matches(name, fields, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"trl_config: {name!r} is not a field of TRL's {config_type.__name__}{hint}"
        )
    # The job its checkpoints belong to: all of it but the id (`train` names each run anew).
    stamp, this_job = trainer_dir(job) / "job.json", job.model_dump_json(exclude={"job_id"})
    stamp.parent.mkdir(parents=True, exist_ok=True)
    if process_rank()[0] == 0:  # one writer; the other ranks wait for it in `train`
        if stamp.is_file() and stamp.read_text() != this_job:
            _drop_checkpoints(stamp.parent)  # another job's weights: never resumed from
        stamp.write_text(this_job)
    if job.hyper.torch_threads:
        torch.set_num_threads(job.hyper.torch_threads)
    device = device_of(job)
    emit("load", job.job_id, total=job.hyper.steps, message=f"loading {job.base_model} on {device}")
    return device


#: The GRPO updates' learning-rate schedule: constant. A round's job is a few steps of one online
#: run that goes on next round; a decay inside each job restarts every round (SFT keeps TRL's).
RL_LR_SCHEDULE = "constant"


def trl_config(config_type: type, job: TrainJob, device: str, **ours: Any) -> Any:
    """`config_type` (GRPOConfig, SFTConfig) with the shared defaults, `ours`, then the job's."""
    hyper, cuda = job.hyper, device == "cuda"
    shared: dict[str, Any] = dict(
        output_dir=str(trainer_dir(job)),
        max_steps=hyper.steps,
        learning_rate=hyper.learning_rate,
        seed=hyper.seed,
        use_cpu=not cuda,
        bf16=cuda,
        gradient_checkpointing=hyper.gradient_checkpointing,
        logging_steps=1,
        report_to=["tensorboard", "wandb"] if os.environ.get("WANDB_PROJECT") else "tensorboard",
        save_strategy="steps",
        save_steps=0.1,  # below 1: a fraction of max_steps
        save_total_limit=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    return config_type(**{**shared, **ours, **hyper.trl_config})


def _checkpoints(out: Path) -> list[Path]:
    found = [p for p in out.glob("checkpoint-*") if p.name.partition("-")[2].isdigit()]
    return sorted(found, key=lambda p: int(p.name.partition("-")[2]))


def _drop_checkpoints(out: Path) -> None:
    for checkpoint in _checkpoints(out):
        shutil.rmtree(checkpoint, ignore_errors=True)


def train(trainer: Any, job: TrainJob) -> dict[str, Any]:
    """`trainer.train()`, from the last complete checkpoint (its trainer state is written last)
    if any. Returns the loss, the L2 norm of the trainable weights' change since the job's start,
    the checkpoint resumed from (None: none) and the logged steps."""
    out = Path(trainer.args.output_dir)
    main = trainer.accelerator.is_main_process
    trainer.accelerator.wait_for_everyone()  # rank 0 dropped stale checkpoints: all see the same
    last = next(
        (p for p in reversed(_checkpoints(out)) if (p / "trainer_state.json").is_file()), None
    )
    if last is not None:
        emit("load", job.job_id, message=f"resuming from {last.name}, left by a killed run")
    params = trainer.model.named_parameters
    before = {n: p.detach().to("cpu", copy=True) for n, p in params() if p.requires_grad}
    output = trainer.train(resume_from_checkpoint=str(last) if last else None)
    change = sum(
        float((p.detach().to("cpu").float() - before[n].float()).pow(2).sum())
        for n, p in trainer.model.named_parameters()
        if n in before
    )
    trainer.accelerator.wait_for_everyone()  # every rank is past its last checkpoint
    if main:
        _drop_checkpoints(out)
    return {
        "train_loss": output.training_loss,
        "param_change_l2": math.sqrt(change),
        "resumed_from": last.name if last else None,
        "log_history": [h for h in trainer.state.log_history if "loss" in h or "reward" in h],
    }


def save_weights(trainer: Any, tokenizer: Any, job: TrainJob, result: WorkerResult) -> WorkerResult:
    """The weights in work_dir/weights (the tokenizer too, for full weights), named in the result
    for the parent to publish. Called on every rank (gathering sharded weights is collective);
    rank 0 alone writes, the others return their result without weights."""
    accelerator = trainer.accelerator
    state_dict = None
    if accelerator.distributed_type != "NO":
        # The whole state on rank 0 (DDP: its own copy; ZeRO-3 / FSDP: gathered from the shards).
        state_dict = accelerator.get_state_dict(trainer.model_wrapped)
    if not accelerator.is_main_process:
        return result
    emit(
        "save", job.job_id, step=result.steps_done, total=job.hyper.steps, message="saving weights"
    )
    weights = Path(job.work_dir) / WEIGHTS_DIR
    trainer.model.save_pretrained(str(weights), state_dict=state_dict)
    if result.kind == "full":
        tokenizer.padding_side = "left"  # the policy generates; SFT pads on the right
        tokenizer.save_pretrained(str(weights))
    result.weights_dir = str(weights)
    return result
