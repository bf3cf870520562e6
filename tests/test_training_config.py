"""Training config the TRL way (training/trl_worker.py): each trainer's own TRL config with our
defaults and the job's overrides, TensorBoard logs in the job's folder, mid-run checkpoints, and a
killed job that resumes from its last one.

The resume test is real: a worker process trains a tiny model with TRL's SFTTrainer, is killed
(SIGKILL) once a checkpoint is on disk, and the same job run again continues at the next step.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
from pathlib import Path

import pytest

from autoenvscaling.training.backend import TrainHyperParams, TrainingError, TrainJob, TrainProgress
from autoenvscaling.training.checkpoints import CheckpointRegistry

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]


def _job(tmp_path: Path, **trl: object) -> TrainJob:
    hyper = TrainHyperParams(trl_config=dict(trl))
    return TrainJob(job_id="j", base_model="m", task_dirs=[], work_dir=tmp_path, hyper=hyper)


def test_each_trainer_gets_its_own_config_with_our_defaults_and_the_jobs_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from trl import GRPOConfig, SFTConfig

    from autoenvscaling.training.trl_worker import trl_config

    monkeypatch.delenv("WANDB_PROJECT", raising=False)
    job = _job(tmp_path, save_steps=3, lr_scheduler_type="cosine")
    grpo = trl_config(GRPOConfig, job, "cpu", num_generations=2, per_device_train_batch_size=2)
    sft = trl_config(SFTConfig, job, "cpu", max_length=64)
    assert isinstance(grpo, GRPOConfig) and isinstance(sft, SFTConfig)
    for config in (grpo, sft):
        assert config.report_to == ["tensorboard"]
        assert Path(config.output_dir) == tmp_path / "trainer"  # inside the job's folder
        assert (config.save_strategy, config.save_total_limit) == ("steps", 1)
        assert config.save_steps == 3 and config.lr_scheduler_type == "cosine"  # the job's
        assert config.max_steps == job.hyper.steps and config.use_cpu  # ours
    assert grpo.num_generations == 2 and sft.max_length == 64  # the worker's own
    monkeypatch.setenv("WANDB_PROJECT", "aes")
    assert trl_config(SFTConfig, _job(tmp_path), "cpu").report_to == ["tensorboard", "wandb"]
    assert trl_config(SFTConfig, _job(tmp_path, report_to="none"), "cpu").report_to == []


def test_an_unknown_field_is_named_before_any_weights_load(tmp_path: Path) -> None:
    from trl import GRPOConfig

    from autoenvscaling.training.trl_worker import start_job

    with pytest.raises(
        ValueError, match="'lerning_rate' is not a field of TRL's GRPOConfig"
    ) as err:
        start_job(_job(tmp_path, lerning_rate=0.1), GRPOConfig)
    assert "did you mean 'learning_rate'" in str(err.value)


def test_train_takes_trl_fields_as_a_json_object(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from autoenvscaling.cli.main import app

    for given in ("[1]", "{not json"):
        args = ["train", "--registry", str(tmp_path), "--trl-config", given]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2 and "--trl-config" in result.output, result.output
        result = CliRunner().invoke(app, ["cold-start", "--trl-config", given])
        assert result.exit_code == 2 and "--trl-config" in result.output, result.output


def test_the_cold_start_sft_takes_trl_fields_and_they_enter_its_fingerprint() -> None:
    """The cold start's SFT is a trainer too: the run's `cold_start_trl_config` reaches its
    settings (and so its job), and a changed override builds a new checkpoint, not the cached one."""
    from autoenvscaling.graphs.cold_start.start import ColdStartSettings, fingerprint, settings_for
    from autoenvscaling.graphs.config import RunConfig

    fields = {"logging_steps": 3, "report_to": "none"}
    settings = settings_for(RunConfig(cold_start_trl_config=fields))
    assert settings.trl_config == fields
    plain = settings_for(RunConfig())
    tasks = Path(__file__).parent / "fixtures"
    assert fingerprint("base", tasks, settings) != fingerprint("base", tasks, plain)
    # ... while the replayed dataset does not depend on it (only the SFT trains again).
    assert fingerprint("base", tasks, settings, dataset=True) == fingerprint(
        "base", tasks, ColdStartSettings(proposer=plain.proposer), dataset=True
    )


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from tests.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny")


@pytest.mark.slow  # two worker processes start (torch, TRL): about 70 s on 2 cores
@pytest.mark.timeout(300)
def test_a_killed_job_resumes_from_its_checkpoint_and_logs_to_tensorboard(
    tiny_model: Path, tmp_path: Path
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from autoenvscaling.training.sft.data import to_hf_dataset
    from autoenvscaling.training.sft.trl_backend import SFTJob, TRLSFTBackend
    from tests.test_train_sft import _examples

    to_hf_dataset(_examples()).save_to_disk(str(tmp_path / "dataset"))
    steps = 8
    job = SFTJob(
        job_id="resume",
        base_model=str(tiny_model),
        dataset=tmp_path / "dataset",
        work_dir=tmp_path / "job",
        hyper=TrainHyperParams(
            steps=steps, learning_rate=5e-3, torch_threads=1, trl_config={"save_steps": 1}
        ),
    )
    trainer_dir = tmp_path / "job" / "trainer"
    backend = TRLSFTBackend(CheckpointRegistry(tmp_path / "registry"), timeout_sec=240)

    def kill_after_a_checkpoint(event: TrainProgress) -> None:
        saved = list(trainer_dir.glob("checkpoint-*/trainer_state.json"))
        if event.stage == "step" and saved and backend.worker_pid:
            os.killpg(backend.worker_pid, signal.SIGKILL)

    with pytest.raises(TrainingError, match="killed by signal 9"):
        asyncio.run(backend.train(job, kill_after_a_checkpoint))
    saved = sorted(trainer_dir.glob("checkpoint-*/trainer_state.json"))
    assert saved, "the killed run left no complete checkpoint"
    at = int(saved[-1].parent.name.split("-")[1])
    assert at < steps

    events: list[TrainProgress] = []
    result = asyncio.run(backend.train(job, events.append))
    assert result.checkpoint is not None and result.steps_done == steps
    assert result.metrics["resumed_from"] == f"checkpoint-{at}"
    assert any(f"resuming from checkpoint-{at}" in e.message for e in events)
    trained = [e.step for e in events if e.stage == "step" and "loss" in e.metrics]
    assert trained[0] == at + 1 and trained[-1] == steps  # it continued, it did not restart
    assert result.metrics["param_change_l2"] > 0
    assert not list(trainer_dir.glob("checkpoint-*"))  # a finished job keeps no checkpoint

    # TensorBoard: one event file per run in the job's folder; the resumed run logs steps at+1..
    files = sorted(trainer_dir.glob("runs/*/events.out.tfevents.*"))
    assert len(files) == 2, files
    logged: set[int] = set()
    for file in files:
        scalars = EventAccumulator(str(file.parent)).Reload().Scalars("train/loss")
        logged |= {s.step for s in scalars}
    assert logged == set(range(1, steps + 1))
