"""Training on several processes, for real: the SFT and GRPO workers under `accelerate launch`
with 2 processes on CPU (gloo, training/configs/multi_cpu.yaml), a tiny local model, no hub.

What must hold: every rank trains (each reports its own steps, the parent records them as
`rank_steps`); rank 0 alone saves the weights and writes result.json; the adapter equals what one
process makes of the same job; and a rank that crashes fails the job with that rank's error, no
checkpoint published and nothing of the process group left running.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import socket
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.main import app
from autoenvscaling.training.backend import (
    TrainHyperParams,
    TrainingError,
    TrainJob,
    TrainProgress,
    TrainResult,
)
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend
from autoenvscaling.training.sft.data import SFTExample, to_hf_dataset
from autoenvscaling.training.sft.trl_backend import SFTJob, TRLSFTBackend
from autoenvscaling.training.worker_backend import AccelerateLauncher, WorkerBackend
from autoenvscaling.training.worker_protocol import (
    LOG_FILE,
    RESULT_FILE,
    TEST_CRASH_RANK_ENV,
    WEIGHTS_DIR,
    parse_event,
)
from tests.test_training_grpo import _job as grpo_job
from tests.test_training_grpo import tiny_model as tiny_model  # noqa: F401 - a fixture

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]

# Four examples, one optimizer step = all four: a step's gradient then does not depend on how the
# examples were shuffled or divided among ranks, only on the arithmetic (see the tolerance below).
COMMANDS = [
    ("Write hello into /app/hello.txt.", "echo hello > /app/hello.txt"),
    ("Count the lines of /app/data.csv.", "wc -l < /app/data.csv > /app/count.txt"),
    ("List /app into /app/ls.txt.", "ls /app > /app/ls.txt"),
    ("Print the date into /app/date.txt.", "date > /app/date.txt"),
]


RUN_TOOL = {
    "type": "function",
    "function": {
        "name": "run",
        "description": "Run a bash command.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


def _free_port() -> int:
    with socket.socket() as sock:  # torchrun's rendezvous: a port no other test holds
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _two_processes() -> AccelerateLauncher:
    return AccelerateLauncher.named("multi_cpu", num_processes=2, main_process_port=_free_port())


@pytest.fixture(scope="module")
def plain_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny policy without the warm-up GRPO needs (SFT learns from scratch): seconds."""
    from tests.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("model") / "plain")


@pytest.fixture(scope="module")
def sft_dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    examples = [
        SFTExample(
            messages=[
                {"role": "user", "content": instruction},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [
                        {
                            "id": "call_0",
                            "type": "function",
                            "function": {"name": "run", "arguments": {"command": command}},
                        }
                    ],
                },
                {"role": "tool", "tool_call_id": "call_0", "content": '{"exit_code": 0}'},
                {"role": "assistant", "content": "Done."},
            ],
            tools=[RUN_TOOL],
            role="solver",
            task_id=f"t{i}",
            source="test",
            reward=1.0,
        )
        for i, (instruction, command) in enumerate(COMMANDS)
    ]
    path = tmp_path_factory.mktemp("sft") / "dataset"
    to_hf_dataset(examples).save_to_disk(str(path))
    return path


def _sft_job(model: Path, dataset: Path, work: Path, steps: int = 3) -> SFTJob:
    return SFTJob(
        job_id=f"sft-{work.name}",
        base_model=str(model),
        dataset=dataset,
        batch_size=len(COMMANDS),
        max_length=512,
        work_dir=work,
        hyper=TrainHyperParams(steps=steps, learning_rate=1e-3, seed=0, torch_threads=1),
    )


def _worker_events(work: Path) -> list[TrainProgress]:
    """Every event every rank printed (the parent forwards rank 0's only), from the job's log."""
    lines = (work / LOG_FILE).read_text().splitlines()
    return [e for e in map(parse_event, lines) if e is not None]


def _lora(weights: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(weights / "adapter_model.safetensors"))


async def _train(backend: WorkerBackend, job: TrainJob) -> tuple[TrainResult, float]:
    started = time.monotonic()
    result = await backend.train(job)
    return result, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.timeout(600)
async def test_sft_on_two_processes_trains_on_every_rank_like_one_process(
    plain_model: Path,
    sft_dataset: Path,
    tmp_path: Path,
) -> None:
    """Same data, same seed, same batch of 4 per step: 1 process x 4 vs 2 processes x 2, the
    latter as a user runs it: `train --sft ... --accelerate-config multi_cpu --num-processes 2`.

    Tolerance: the two runs differ only in float32 summation order (two half-batch gradients
    all-reduced by gloo vs one batch) and in padding to each rank's longest example instead of the
    batch's. transformers averages the loss over the tokens of all ranks (the same normaliser as one
    process), so the gradients agree to float32 rounding (~1e-7 relative). Adam divides each
    gradient by its own running magnitude, so rounding is not damped by a small gradient; the
    elements move by ~lr per step (1e-3, 3 steps). Measured here: the largest difference of any
    LoRA element is ~1e-7. The bound, 1e-5 absolute, is 100x that and 100x below one step's move,
    so a rank that skipped a step or trained on the wrong examples fails it; the adapters' norms
    (the training's change: lora_B starts at zero) agree to 0.1%.
    """
    one = CheckpointRegistry(tmp_path / "one")
    single, single_sec = await _train(
        TRLSFTBackend(one), _sft_job(plain_model, sft_dataset, tmp_path / "w1")
    )
    job = _sft_job(plain_model, sft_dataset, tmp_path / "w2")
    args = [
        "train",
        "--sft",
        str(sft_dataset),
        "--base",
        str(plain_model),
        "--registry",
        str(tmp_path / "two"),
        "--work-dir",
        str(job.work_dir),
        "--steps",
        str(job.hyper.steps),
        "--lr",
        str(job.hyper.learning_rate),
        "--threads",
        "1",
        "--batch-size",
        str(job.batch_size),
        "--max-length",
        str(job.max_length),
        "--accelerate-config",
        "multi_cpu",
        "--num-processes",
        "2",
        "--json",
    ]
    started = time.monotonic()
    cli = await asyncio.to_thread(CliRunner().invoke, app, args)
    multi_sec = time.monotonic() - started
    assert cli.exit_code == 0, cli.output
    multi = TrainResult.model_validate_json(cli.stdout[cli.stdout.index("{") :])
    two = CheckpointRegistry(tmp_path / "two")
    print(f"\nSFT 3 steps: 1 process {single_sec:.1f}s, 2 processes {multi_sec:.1f}s")

    # Every rank trained: each reported its three optimizer steps itself.
    assert "rank_steps" not in single.metrics
    assert multi.metrics["rank_steps"] == {"0": 3, "1": 3}
    assert multi.steps_done == single.steps_done == 3
    assert (single.metrics["batch_per_process"], multi.metrics["batch_per_process"]) == (4, 2)
    events = _worker_events(tmp_path / "w2")
    assert {e.rank for e in events if e.stage == "step"} == {0, 1}
    # Rank 0 alone saved and wrote the result: one save, one done with a result, one checkpoint.
    assert [e.rank for e in events if e.stage == "save"] == [0]
    assert multi.checkpoint is not None and [c.id for c in two.list()] == [multi.checkpoint.id]
    assert json.loads((tmp_path / "w2" / RESULT_FILE).read_text())["steps_done"] == 3
    assert not (tmp_path / "w2" / WEIGHTS_DIR).exists()  # moved into the registry

    # The adapter is the one a single process makes.
    assert single.checkpoint is not None
    a, b = _lora(single.checkpoint.path), _lora(multi.checkpoint.path)
    assert a.keys() == b.keys() and any("lora_B" in k for k in a)
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    print(f"largest LoRA difference, 1 vs 2 processes: {worst:.2e}")
    assert worst <= 1e-5, f"largest LoRA difference {worst:.2e}"
    # lora_B starts at zero: its norm is the training's change, and it is not nothing.
    norm_a = sum(float(a[k].norm()) for k in a if "lora_B" in k)
    norm_b = sum(float(b[k].norm()) for k in b if "lora_B" in k)
    assert norm_a > 1e-3 and abs(norm_a - norm_b) <= 1e-3 * norm_a, (norm_a, norm_b)
    # The losses each run logged (rank 0's, averaged over both ranks by the trainer) agree too.
    losses = [h["loss"] for h in single.metrics["log_history"]]
    assert [h["loss"] for h in multi.metrics["log_history"]] == pytest.approx(losses, rel=1e-4)


@pytest.mark.timeout(300)
async def test_a_rank_that_crashes_fails_the_job_with_its_error(
    plain_model: Path,
    sft_dataset: Path,
    tmp_path: Path,
) -> None:
    """Rank 1 raises on its first step (the test-only hook): the job fails naming rank 1 and its
    exception, nothing is published, and the worker's whole process group is gone."""
    registry = CheckpointRegistry(tmp_path / "registry")
    backend = TRLSFTBackend(
        registry, launcher=_two_processes(), env={TEST_CRASH_RANK_ENV: "1"}, timeout_sec=240
    )
    groups: list[int] = []
    job = _sft_job(plain_model, sft_dataset, tmp_path / "work")

    def watch(event: TrainProgress) -> None:
        if backend.worker_pid is not None and not groups:
            groups.append(backend.worker_pid)  # the launcher leads the job's process group

    started = time.monotonic()
    with pytest.raises(TrainingError) as err:
        await backend.train(job, watch)
    text = str(err.value)
    assert "rank 1 of 2: RuntimeError: test-only crash of rank 1" in text, text
    assert "no checkpoint published" in text
    # Failing took seconds, not gloo's 30-minute collective timeout.
    assert time.monotonic() - started < 200
    assert registry.current() is None and registry.list() == []
    work = tmp_path / "work"
    assert not (work / RESULT_FILE).exists() and not (work / WEIGHTS_DIR).exists()
    crashed = [e for e in _worker_events(work) if e.stage == "error"]
    assert crashed and crashed[0].rank == 1
    # Nothing of the job is left: its process group is empty (killed ranks may take a moment to
    # be reaped by init; a zombie still counts as a member).
    assert groups
    for _ in range(50):
        try:
            os.killpg(groups[0], 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.2)
    else:
        pytest.fail(f"processes of the job's group {groups[0]} are still running")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_grpo_on_two_processes_every_rank_runs_episodes_in_sandboxes(
    engine_ready,
    tiny_model: Path,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    """The GRPO worker, 2 ranks, episodes in real podman sandboxes (2 steps x 2 tasks x 4).

    Why not the adapter against one process: the rollouts are sampled (temperature 1, the group
    needs reward variance), and each rank draws its half of a step's rollouts from its own
    generator, so the episodes, and with them the loss, differ from a single process's. What is
    deterministic, and checked against what tests/test_training_grpo.py asserts for one process:
    the step's batch (8 rollouts, 4 per rank), the tasks of each step, and the groups TRL
    normalises over: each 4 consecutive gathered episodes are one task's, so the advantages every
    rank computes are the whole group's, and the group counts are the job's, not a rank's.
    """
    registry = CheckpointRegistry(tmp_path / "registry")
    backend = TRLGRPOBackend(registry, launcher=_two_processes(), timeout_sec=560)
    result = asyncio.run(backend.train(grpo_job(tiny_model, tmp_path)))

    assert result.steps_done == 2 and result.metrics["rank_steps"] == {"0": 2, "1": 2}
    assert result.groups_total == 4  # 2 steps x 2 tasks, counted over both ranks
    assert result.metrics["episodes"] == 16
    work = tmp_path / "work"
    episodes = json.loads((work / RESULT_FILE).read_text())["episodes"]
    # Each rank ran half of every step's rollouts in its own sandboxes.
    assert [e["rank"] for e in episodes] == ([0] * 4 + [1] * 4) * 2
    tasks = [Path(e["task_dir"]).name for e in episodes]
    assert tasks == (["write-numbers"] * 4 + ["hello-file"] * 4) * 2
    steps = [[Path(t).name for t in step] for step in result.metrics["step_tasks"]]
    assert steps == [["write-numbers", "hello-file"]] * 2
    assert all(e["reward"] is not None for e in episodes)
    events = _worker_events(work)
    assert {e.rank for e in events if e.stage == "step"} == {0, 1}
    assert {e.rank for e in events if e.stage == "rewards"} == {0}
    if result.checkpoint is None:  # an honest "no update" must say why (every group flat)
        assert "no reward variance" in (result.reason or "")
        return
    assert [e.rank for e in events if e.stage == "save"] == [0]
    assert [c.id for c in registry.list()] == [result.checkpoint.id]
    assert result.metrics["param_change_l2"] > 0
    assert sum(float(t.norm()) for k, t in _lora(result.checkpoint.path).items() if "lora_B" in k)
