"""The training parent/worker contract (training/worker_protocol.py) end to end, without torch:
the real parent (`TRLGRPOBackend.train`) starts a real child Python that serves the job through
`serve_job`, and the parent gets a typed result and publishes (or refuses to publish) weights."""

from __future__ import annotations

import asyncio
import io
import sys
import textwrap
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from autoenvscaling.training.backend import TrainingError, TrainJob, TrainProgress
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend
from autoenvscaling.training.worker_protocol import (
    JOB_FILE,
    RESULT_FILE,
    emit,
    parse_event,
)

pytestmark = pytest.mark.timeout(120)

# A worker whose "training" writes one file as its weights, or fails as the job's id asks.
WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    from autoenvscaling.training.backend import TrainJob
    from autoenvscaling.training.worker_protocol import WorkerResult, emit, serve_job

    def run(job: TrainJob) -> WorkerResult:
        if job.job_id == "fails":
            raise ValueError("the base model is missing")
        if job.job_id == "junk":
            (Path(job.work_dir) / "result.json").write_text('{"steps_done": "many"}')
            sys.exit(0)
        emit("step", job.job_id, step=1, total=job.hyper.steps, metrics={"loss": 0.5})
        weights = Path(job.work_dir) / "weights"
        weights.mkdir()
        (weights / "adapter_config.json").write_text("{}")
        return WorkerResult(
            job_id=job.job_id, weights_dir=str(weights), kind="lora", base_model="base",
            metrics={"train_loss": 0.5}, steps_done=1, groups_total=2, step_tasks=[["t1"]],
        )

    sys.exit(serve_job("fake_worker", TrainJob, run, None))
    """
)


class ScriptBackend(TRLGRPOBackend):
    """The GRPO parent, starting a worker script instead of the torch worker module."""

    worker_name = "fake worker"

    def __init__(self, registry: CheckpointRegistry, script: Path) -> None:
        super().__init__(registry, timeout_sec=90)
        self.script = script

    def worker_command(self, job_path: Path) -> list[str]:
        return [sys.executable, str(self.script), str(job_path)]


def _train(tmp_path: Path, job_id: str, events: list[TrainProgress] | None = None):
    script = tmp_path / "fake_worker.py"
    script.write_text(WORKER)
    registry = CheckpointRegistry(tmp_path / "registry")
    job = TrainJob(job_id=job_id, base_model="base", task_dirs=[], work_dir=tmp_path / "work")
    backend = ScriptBackend(registry, script)
    return registry, asyncio.run(backend.train(job, None if events is None else events.append))


def test_event_round_trip_and_free_text() -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        emit("step", "j1", step=2, total=3, message="hi", metrics={"loss": 0.25, "odd": Path("/x")})
    event = parse_event(out.getvalue().rstrip("\n"))
    assert event == TrainProgress(
        job_id="j1", stage="step", step=2, total_steps=3, message="hi",
        metrics={"loss": 0.25, "odd": "/x"},
    )  # fmt: skip
    assert parse_event("Loading checkpoint shards: 100%") is None
    assert parse_event("@@aes {not json") is None


def test_clean_worker_result_is_typed_and_published(tmp_path) -> None:
    events: list[TrainProgress] = []
    registry, result = _train(tmp_path, "ok", events)
    assert [e.stage for e in events] == ["step", "done"]
    assert result.steps_done == 1 and result.groups_total == 2
    assert result.metrics == {"train_loss": 0.5, "step_tasks": [["t1"]]}
    assert result.checkpoint is not None and registry.current_id() == result.checkpoint.id
    assert (result.checkpoint.path / "adapter_config.json").is_file()
    work = tmp_path / "work"
    assert (work / JOB_FILE).is_file() and (work / RESULT_FILE).is_file()
    assert not (work / "result.tmp").exists()  # published by rename


def test_failing_worker_reports_its_error_and_publishes_nothing(tmp_path) -> None:
    with pytest.raises(TrainingError) as err:
        _train(tmp_path, "fails")
    text = str(err.value)
    assert "exited with code 1" in text and "the base model is missing" in text
    assert "worker.log" in text
    assert CheckpointRegistry(tmp_path / "registry").list() == []
    assert not (tmp_path / "work" / RESULT_FILE).exists()


def test_invalid_result_file_is_a_training_error(tmp_path) -> None:
    with pytest.raises(TrainingError, match="not a valid result"):
        _train(tmp_path, "junk")
    assert CheckpointRegistry(tmp_path / "registry").list() == []
