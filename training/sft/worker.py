"""The SFT trainer process: `python -m autoenvscaling.training.sft.worker JOB.json`.

Trains the policy (LoRA or full) with TRL's SFTTrainer on an SFT dataset (messages + tools, as
`autoenvscaling sft-data` writes it) and leaves the weights and `result.json` in the job's
work_dir; the parent publishes them (training/sft/trl_backend.py). The policy is loaded as every
worker loads it (training/policy_loading.py), so SFT and GRPO produce the same kind of checkpoint;
the job, events and result file follow training/worker_protocol.py like every worker. Under
`accelerate launch` each rank takes its share of every step's examples (`batch_size` is the whole
step's, divided among the ranks): the update is the one a single process makes.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import Any

from ..policy_loading import load_policy
from ..trl_worker import save_weights, start_job, train, trl_config
from ..worker_protocol import (
    WorkerResult,
    process_rank,
    serve_job,
    step_progress,
)
from .data import load_sft_dataset
from .step_timing import StepTimer, lengths_by_role
from .trl_backend import SFTJob


def run(job: SFTJob) -> WorkerResult:
    from trl.trainer.sft_config import SFTConfig
    from trl.trainer.sft_trainer import SFTTrainer

    started = time.monotonic()
    hyper = job.hyper
    device = start_job(job, SFTConfig)
    model, tokenizer, peft_config, kind, new_base = load_policy(job, device)
    tokenizer.padding_side = "right"  # training pads on the right; generation on the left
    dataset = load_sft_dataset(Path(job.dataset))
    if len(dataset) == 0:
        raise ValueError(f"the SFT dataset {job.dataset} has no examples")
    batch, ranks = min(job.batch_size, len(dataset)), process_rank()[1]
    if batch % ranks:
        raise ValueError(f"a step's {batch} examples do not divide among {ranks} processes")
    config = trl_config(
        SFTConfig,
        job,
        device,
        per_device_train_batch_size=batch // ranks,
        max_length=job.max_length,
        assistant_only_loss=job.assistant_only_loss,
    )

    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[step_progress(job.job_id, hyper.steps)],
    )
    timer = StepTimer(trainer, lengths_by_role(trainer.train_dataset))
    trained = train(trainer, job)
    history = trained["log_history"]
    metrics: dict[str, Any] = {
        **trained,
        "first_loss": history[0]["loss"] if history else None,
        "last_loss": history[-1]["loss"] if history else None,
        "examples": len(dataset),
        "batch_per_process": config.per_device_train_batch_size,
        "by_role": {r: int(sum(1 for x in dataset["role"] if x == r)) for r in set(dataset["role"])}
        if "role" in dataset.column_names
        else {},
        "device": device,
        "duration_sec": round(time.monotonic() - started, 2),
        # This process's CPU time: on a shared machine the wall clock says little about cost.
        "cpu_seconds": round(_cpu_seconds(), 1),
        **timer.summary(),
    }
    result = WorkerResult(
        job_id=job.job_id,
        kind=kind,
        base_model=new_base,
        metrics=metrics,
        steps_done=trainer.state.global_step,
    )
    return save_weights(trainer, tokenizer, job, result)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    return serve_job("sft.worker", SFTJob, run, argv)


if __name__ == "__main__":
    sys.exit(main())
