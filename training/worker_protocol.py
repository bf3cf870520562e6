"""The contract between a training parent (the graph or CLI process) and its worker process.

Both sides import this module and nothing else of each other: the parent writes the job as
`work_dir/job.json`, starts `python -m <worker module> job.json`, and reads progress lines
`@@aes {TrainProgress json}` from the worker's stdout; the worker trains, publishes
`work_dir/result.json` (a `WorkerResult`) atomically and exits 0, or reports an `error` event and
exits non-zero. The parent publishes the weights only after a clean exit with a valid result.
Under `accelerate launch` the worker is several processes (ranks, `process_rank`): every rank
trains and reports its events tagged with its rank; rank 0 alone writes the weights and the result.
Import-light (pydantic only): the parent process must never import torch.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from .backend import Behaviour, TrainingError, TrainJob, TrainProgress
from .orphan import watch_parent, watch_process
from .policy import CheckpointKind

EVENT_PREFIX = "@@aes "
JOB_FILE = "job.json"
RESULT_FILE = "result.json"
LOG_FILE = "worker.log"
WEIGHTS_DIR = "weights"
#: Test-only fault injection: the rank named here raises at the start of its first optimizer step
#: (tests/test_training_multiprocess.py checks that the parent reports that rank's error).
TEST_CRASH_RANK_ENV = "AUTOENVSCALING_TEST_CRASH_RANK"
#: The parent's pid: under a launcher the worker's own parent is the launcher, not the parent.
PARENT_PID_ENV = "AUTOENVSCALING_TRAINING_PARENT"

#: The worker's environment: offline hubs, quiet libraries. The parent passes it to the child;
#: the worker also sets it on itself (setdefault) when started some other way.
WORKER_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TRL_EXPERIMENTAL_SILENCE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "HARBOR_TELEMETRY": "0",
    "PYTHONUNBUFFERED": "1",
}


class WorkerResult(BaseModel):
    """What the worker leaves in work_dir/result.json for the parent to publish."""

    job_id: str
    weights_dir: str | None = None
    kind: CheckpointKind = "lora"
    base_model: str = ""
    metrics: dict[str, Any] = Field(default_factory=dict)
    steps_done: int = 0
    groups_total: int = 0
    groups_dropped_no_variance: int = 0
    reason: str | None = None
    episodes: list[dict[str, Any]] = Field(default_factory=list)
    step_tasks: list[list[str]] = Field(
        default_factory=list, description="Task folders each optimizer step trained on."
    )
    behaviour: Behaviour | None = None


# -- parent side -------------------------------------------------------------------------------


def write_job(job: TrainJob) -> Path:
    """Prepare the job's work_dir (no stale result) and write the job file; returns its path."""
    work = Path(job.work_dir)
    work.mkdir(parents=True, exist_ok=True)
    (work / RESULT_FILE).unlink(missing_ok=True)
    path = work / JOB_FILE
    path.write_text(job.model_dump_json(indent=2))
    return path


def parse_event(line: str) -> TrainProgress | None:
    """The progress event on a worker's stdout line; None for free text (library logs)."""
    if not line.startswith(EVENT_PREFIX):
        return None
    try:
        return TrainProgress.model_validate(json.loads(line[len(EVENT_PREFIX) :]))
    except ValueError:  # includes pydantic's ValidationError and JSONDecodeError
        return None


def read_result(job: TrainJob, log_path: Path) -> WorkerResult:
    """The result of a worker that exited cleanly; `TrainingError` when it left none (or junk)."""
    path = Path(job.work_dir) / RESULT_FILE
    if not path.is_file():
        raise TrainingError(
            f"training job {job.job_id}: the worker exited cleanly but wrote "
            f"no {RESULT_FILE} (log: {log_path})"
        )
    try:
        return WorkerResult.model_validate_json(path.read_text())
    except (OSError, ValidationError) as exc:
        raise TrainingError(
            f"training job {job.job_id}: the worker's {RESULT_FILE} is not a valid result "
            f"({exc}); no checkpoint published (log: {log_path})"
        ) from None


# -- worker side -------------------------------------------------------------------------------


def process_rank() -> tuple[int, int]:
    """(rank, world size) of this worker process: what torchrun (`accelerate launch`) sets in
    RANK and WORLD_SIZE; (0, 1) for a plain `python -m` worker."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def emit(
    stage: str,
    job_id: str,
    *,
    step: int = 0,
    total: int = 0,
    message: str = "",
    metrics: dict[str, Any] | None = None,
) -> None:
    """One progress event on stdout, as `parse_event` reads it."""
    event = TrainProgress(
        job_id=job_id,
        stage=stage,
        step=step,
        total_steps=total,
        message=message,
        metrics=metrics or {},
        rank=process_rank()[0],
    )
    # json.dumps with default=str: a metric of an odd type is shown, not fatal.
    sys.stdout.write(EVENT_PREFIX + json.dumps(event.model_dump(), default=str) + "\n")
    sys.stdout.flush()


def step_progress(job_id: str, total: int) -> Any:
    """A transformers `TrainerCallback` that emits each logged step as a progress event (on every
    rank, each tagged with its own). Also the test-only crash hook (`TEST_CRASH_RANK_ENV`)."""
    from transformers import TrainerCallback  # workers only: the parent never imports torch

    crash_rank = os.environ.get(TEST_CRASH_RANK_ENV)

    class StepProgress(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            rank = process_rank()[0]
            if crash_rank is not None and int(crash_rank) == rank and state.global_step == 0:
                raise RuntimeError(f"test-only crash of rank {rank} ({TEST_CRASH_RANK_ENV})")

        def on_log(self, args, state, control, logs=None, **kwargs):
            emit(
                "step",
                job_id,
                step=state.global_step,
                total=total,
                metrics={k: v for k, v in (logs or {}).items() if isinstance(v, int | float)},
            )

    return StepProgress()


def publish_result(result: WorkerResult, work_dir: Path) -> Path:
    """Write result.json atomically: the parent never reads half a result."""
    out = Path(work_dir) / RESULT_FILE
    tmp = out.with_suffix(".tmp")
    tmp.write_text(result.model_dump_json(indent=2))
    os.replace(tmp, out)
    return out


def serve_job[J: TrainJob](
    module: str, job_model: type[J], run_job: Callable[[J], WorkerResult], argv: list[str] | None
) -> int:
    """The worker process boundary all three workers share (GRPO, SFT, proposer): read the job,
    die with the parent, report any failure as an event, publish the result file atomically."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(f"usage: python -m autoenvscaling.training.{module} JOB.json", file=sys.stderr)
        return 2
    job = job_model.model_validate_json(Path(argv[0]).read_text())
    # A run killed mid-training must not leave its worker (and the episodes' sandboxes) behind.

    on_orphan = lambda: emit("error", job.job_id, message="parent died; exiting")  # noqa: E731
    watch_parent(os.getppid(), on_orphan, grace_sec=0.0)
    training_parent = int(os.environ.get(PARENT_PID_ENV, "0"))
    if training_parent and training_parent != os.getppid():  # a rank under `accelerate launch`
        watch_process(training_parent, on_orphan, grace_sec=0.0)
    rank, world = process_rank()
    try:
        result = run_job(job)
    except Exception as exc:  # noqa: BLE001 - the process boundary: report any failure as an event
        traceback.print_exc()
        who = f"rank {rank} of {world}: " if world > 1 else ""
        emit("error", job.job_id, message=f"{who}{type(exc).__name__}: {exc}")
        return 1
    if rank == 0:  # the other ranks trained the same weights; one result, one writer
        publish_result(result, Path(job.work_dir))
    emit(
        "done",
        job.job_id,
        step=result.steps_done,
        total=job.hyper.steps,
        message=result.reason
        or ("checkpoint weights saved" if rank == 0 else "trained; rank 0 writes the weights"),
    )
    return 0
