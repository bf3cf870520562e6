"""What the three TRL backends share: a worker process that trains, and the publication after it.

`WorkerBackend.train` writes the job, starts `python -m <worker_module> job.json` (or the same module
under `accelerate launch`), reads progress events from its stdout and, only after the worker
exited cleanly with a valid result, publishes the weights it left in the job's work_dir into the
`CheckpointRegistry` (files and events: training/worker_protocol.py). A crash, a kill or a
timeout raises `TrainingError` with the worker's last words and its log path; the registry is
untouched. Under a launcher the worker is several ranks: each reports its steps (the result's
`rank_steps`), the first rank to fail is the error named, and once the launcher exits whatever is
left of its process group is killed. The GRPO, SFT and proposer backends are siblings that name
their worker module. The graph process never imports torch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import deque
from pathlib import Path

from pydantic import BaseModel, Field

from .backend import ProgressCallback, TrainingError, TrainJob, TrainResult
from .checkpoints import CheckpointRegistry
from .worker_protocol import (
    LOG_FILE,
    PARENT_PID_ENV,
    WORKER_ENV,
    parse_event,
    read_result,
    write_job,
)

CONFIG_DIR = Path(__file__).resolve().parent / "configs"


class AccelerateLauncher(BaseModel):
    """Run the worker under `accelerate launch` (multi-GPU / multi-node) instead of plain Python.

    `config_file` is an accelerate config such as training/configs/deepspeed_zero2.yaml; the
    command is built here and parsed by accelerate itself (tests/test_training_launch.py).
    """

    config_file: Path = Field(description="accelerate config (DeepSpeed / FSDP / multi-GPU).")
    num_processes: int | None = Field(
        default=None, ge=1, description="Overrides the config's count."
    )
    num_machines: int | None = Field(default=None, ge=1)
    machine_rank: int | None = Field(default=None, ge=0)
    main_process_ip: str | None = None
    main_process_port: int | None = None

    @classmethod
    def named(cls, name: str, **overrides: object) -> AccelerateLauncher:
        """A config shipped under training/configs/ by name (e.g. "fsdp") or a path."""
        path = Path(name)
        if not path.suffix:
            path = CONFIG_DIR / f"{name}.yaml"
        if not path.is_file():
            shipped = ", ".join(sorted(p.stem for p in CONFIG_DIR.glob("*.yaml")))
            raise TrainingError(f"no accelerate config {name!r}; shipped: {shipped}")
        return cls(config_file=path, **overrides)  # type: ignore[arg-type]

    def args(self) -> list[str]:
        given = self.model_dump(exclude={"config_file"}, exclude_none=True)
        flags = [arg for name, value in given.items() for arg in (f"--{name}", str(value))]
        return ["--config_file", str(self.config_file), *flags]


class WorkerBackend:
    """`RLBackend` over a TRL trainer in a child Python (which must have the `train` extra)."""

    worker_module: str  # e.g. "autoenvscaling.training.grpo.worker"
    worker_name: str  # in errors: "GRPO worker"

    def __init__(
        self,
        registry: CheckpointRegistry,
        *,
        python: str | None = None,
        timeout_sec: float | None = None,
        make_current: bool = True,
        env: dict[str, str] | None = None,
        launcher: AccelerateLauncher | None = None,
    ) -> None:
        self.registry = registry
        self.launcher = launcher
        self.python = python or sys.executable
        self.timeout_sec = timeout_sec
        self.make_current = make_current
        self.env = env or {}
        self.worker_pid: int | None = None  # the running worker, for callers that watch it

    def worker_command(self, job_path: Path) -> list[str]:
        """`python -m <worker_module> JOB`, or the same module under `accelerate launch`."""
        command = [self.python, "-m", self.worker_module, str(job_path)]
        if self.launcher is not None:
            launch = ["-m", "accelerate.commands.launch", *self.launcher.args(), "--module"]
            command[1:2] = launch
        return command

    async def train(self, job: TrainJob, progress: ProgressCallback | None = None) -> TrainResult:
        started = time.monotonic()
        job_path = write_job(job)
        log_path = Path(job.work_dir) / LOG_FILE
        self.registry.sweep_staging()

        tail: deque[str] = deque(maxlen=60)
        first_error: str | None = None
        rank_steps: dict[int, int] = {}  # the last step each rank reported
        proc = await asyncio.create_subprocess_exec(
            *self.worker_command(job_path),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            env={**os.environ, **WORKER_ENV, PARENT_PID_ENV: str(os.getpid()), **self.env},
            start_new_session=True,  # killable as a group (torch threads, sandbox helpers, ranks)
        )
        self.worker_pid = proc.pid

        async def pump() -> None:
            nonlocal first_error
            assert proc.stdout is not None
            with open(log_path, "a", encoding="utf-8") as log:  # noqa: ASYNC230 - small local log
                async for raw in proc.stdout:
                    line = raw.decode(errors="replace").rstrip("\n")
                    log.write(line + "\n")
                    log.flush()
                    event = parse_event(line)
                    if event is None:
                        tail.append(line)
                        continue
                    if event.stage == "step":
                        rank_steps[event.rank] = max(event.step, rank_steps.get(event.rank, 0))
                    # The first failure is the cause: the other ranks then fail in collectives.
                    if event.stage == "error" and first_error is None:
                        first_error = event.message
                    # Rank 0 speaks for the job; the others' steps are counted above.
                    if progress is not None and (event.rank == 0 or event.stage == "error"):
                        progress(event)

        async def run_to_end() -> None:
            reader = asyncio.ensure_future(pump())
            try:
                await proc.wait()
                _kill_group(proc.pid)  # a rank the launcher left behind (it holds our pipe open)
                await reader
            finally:
                reader.cancel()  # a timeout or cancellation: stop reading too

        try:
            await asyncio.wait_for(run_to_end(), self.timeout_sec)
        except TimeoutError:
            _kill_group(proc.pid)
            await proc.wait()
            raise TrainingError(
                f"training job {job.job_id} timed out after {self.timeout_sec:.0f}s; "
                f"no checkpoint published (log: {log_path})"
            ) from None
        except asyncio.CancelledError:
            _kill_group(proc.pid)
            await proc.wait()
            raise
        finally:
            self.worker_pid = None

        code = proc.returncode
        assert code is not None  # the worker was awaited above
        if code != 0:
            how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
            detail = first_error or "\n".join(list(tail)[-15:])
            raise TrainingError(
                f"training job {job.job_id}: the {self.worker_name} {how}; no checkpoint published, "
                f"the current policy stays. Last output:\n{detail}\n(full log: {log_path})"
            )
        worker = read_result(job, log_path)
        metrics = {**worker.metrics, "step_tasks": worker.step_tasks}
        if len(rank_steps) > 1:  # several processes trained: what each one reported
            metrics["rank_steps"] = {str(rank): rank_steps[rank] for rank in sorted(rank_steps)}
        groups = worker.model_dump(include={"groups_total", "groups_dropped_no_variance"})
        result = TrainResult(
            job_id=job.job_id,
            metrics=metrics,
            steps_done=worker.steps_done,
            reason=worker.reason,
            log_path=log_path,
            behaviour=worker.behaviour,
            **groups,
        )
        if worker.weights_dir:
            manifest = {k: v for k, v in metrics.items() if k not in ("log_history", "step_tasks")}
            if worker.behaviour is not None:
                manifest["behaviour"] = worker.behaviour.model_dump()
            result.checkpoint = self.registry.publish(
                Path(worker.weights_dir),
                base_model=worker.base_model,
                kind=worker.kind,
                parent_id=job.parent.id if job.parent is not None else None,
                job_id=job.job_id,
                metrics={**manifest, **groups, "steps": result.steps_done},
                make_current=self.make_current,
                move=True,
            )
        result.duration_sec = round(time.monotonic() - started, 2)
        return result


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
