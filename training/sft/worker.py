"""The SFT trainer process: `python -m autoenvscaling.training.sft.worker JOB.json`.

Trains the policy (LoRA or full) with TRL's SFTTrainer on an SFT dataset (messages + tools, as
`autoenvscaling sft-data` writes it) and leaves the weights and `result.json` in the job's
work_dir; the parent publishes them (training/sft/trl_backend.py). Loading the policy and the tool-capable
chat template are the GRPO worker's, so both produce the same kind of checkpoint; the job, events
and result file follow training/worker_protocol.py like every worker.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from autoenvscaling.training.grpo.worker import (
    _change_norm,
    _trainable_snapshot,
    load_policy,
    start_job,
)
from autoenvscaling.training.sft.trl_backend import SFTJob
from autoenvscaling.training.worker_protocol import (
    WEIGHTS_DIR,
    WorkerResult,
    emit,
    serve_job,
    step_progress,
)


def run(job: SFTJob) -> WorkerResult:
    from trl.trainer.sft_config import SFTConfig
    from trl.trainer.sft_trainer import SFTTrainer

    from autoenvscaling.training.sft.data import load_sft_dataset

    started = time.monotonic()
    hyper = job.hyper
    work, device = start_job(job)
    model, tokenizer, peft_config, kind, new_base = load_policy(job, device)
    tokenizer.padding_side = "right"  # training pads on the right; generation on the left
    dataset = load_sft_dataset(Path(job.dataset))
    if len(dataset) == 0:
        raise ValueError(f"the SFT dataset {job.dataset} has no examples")
    cuda = device == "cuda"
    config = SFTConfig(
        output_dir=str(work / "trainer"),
        max_steps=hyper.steps,
        learning_rate=hyper.learning_rate,
        per_device_train_batch_size=min(job.batch_size, len(dataset)),
        gradient_accumulation_steps=1,
        max_length=job.max_length,
        assistant_only_loss=job.assistant_only_loss,
        packing=False,
        seed=hyper.seed,
        use_cpu=not cuda,
        bf16=cuda,
        gradient_checkpointing=hyper.gradient_checkpointing,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )

    trainer = SFTTrainer(
        model=model,
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[step_progress(job.job_id, hyper.steps)],
    )
    before = _trainable_snapshot(trainer.model)
    output = trainer.train()
    change = _change_norm(trainer.model, before)
    history = [h for h in trainer.state.log_history if "loss" in h]
    metrics: dict[str, Any] = {
        "train_loss": output.training_loss,
        "first_loss": history[0]["loss"] if history else None,
        "last_loss": history[-1]["loss"] if history else None,
        "param_change_l2": change,
        "examples": len(dataset),
        "by_role": {r: int(sum(1 for x in dataset["role"] if x == r)) for r in set(dataset["role"])}
        if "role" in dataset.column_names
        else {},
        "device": device,
        "duration_sec": round(time.monotonic() - started, 2),
        "log_history": history,
    }
    result = WorkerResult(
        job_id=job.job_id,
        kind=kind,
        base_model=new_base,
        metrics=metrics,
        steps_done=trainer.state.global_step,
    )
    emit("save", job.job_id, step=result.steps_done, total=hyper.steps, message="saving weights")
    weights = work / WEIGHTS_DIR
    # A PreTrainedModel or PeftModel here; transformers types Trainer.model as any nn.Module.
    trainer.model.save_pretrained(str(weights))  # pyright: ignore[reportOptionalMemberAccess, reportCallIssue]
    if kind == "full":
        tokenizer.padding_side = "left"
        tokenizer.save_pretrained(str(weights))
    result.weights_dir = str(weights)
    return result


def main(argv: list[str] | None = None) -> int:
    return serve_job("sft.worker", SFTJob, run, argv)


if __name__ == "__main__":
    sys.exit(main())
