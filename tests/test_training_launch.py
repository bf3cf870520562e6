"""Scale-out contract, offline: the `accelerate launch` command the training node builds is one
accelerate itself parses, and the shipped DeepSpeed/FSDP configs load with accelerate's loader."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoenvscaling.training.backend import TrainingError
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend
from autoenvscaling.training.worker_backend import CONFIG_DIR, AccelerateLauncher

WORKER_MODULE = TRLGRPOBackend.worker_module

CONFIGS = sorted(CONFIG_DIR.glob("*.yaml"))


def test_plain_worker_command_is_unchanged(tmp_path):
    backend = TRLGRPOBackend(CheckpointRegistry(tmp_path / "reg"), python="py")
    assert backend.worker_command(Path("/j/job.json")) == ["py", "-m", WORKER_MODULE, "/j/job.json"]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
def test_accelerate_parses_the_command_and_loads_the_config(config, tmp_path):
    from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
    from accelerate.commands.launch import launch_command_parser

    launcher = AccelerateLauncher.named(
        config.stem,
        num_processes=4,
        num_machines=2,
        machine_rank=1,
        main_process_ip="10.0.0.1",
        main_process_port=29500,
    )
    backend = TRLGRPOBackend(CheckpointRegistry(tmp_path / "reg"), python="py", launcher=launcher)
    command = backend.worker_command(Path("/j/job.json"))
    assert command[:3] == ["py", "-m", "accelerate.commands.launch"]
    args = launch_command_parser().parse_args(command[3:])
    assert (args.config_file, args.num_processes, args.num_machines, args.machine_rank) == (
        str(config),
        4,
        2,
        1,
    )
    assert (args.main_process_ip, args.main_process_port) == ("10.0.0.1", 29500)
    assert args.module and args.training_script == WORKER_MODULE
    assert args.training_script_args == ["/j/job.json"]

    loaded = load_config_from_file(str(config))
    assert isinstance(loaded, ClusterConfig)  # a local machine's config, not SageMaker's
    if config.stem == "multi_cpu":  # torchrun's DDP launch; the workers pick gloo on CPU
        assert str(loaded.distributed_type).endswith("MULTI_GPU") and loaded.use_cpu
        assert loaded.num_processes == 2 and loaded.mixed_precision == "no"
        return
    expected = "FSDP" if "fsdp" in config.stem else "DEEPSPEED"
    assert str(loaded.distributed_type).endswith(expected)
    assert loaded.num_processes == 8 and loaded.mixed_precision == "bf16"
    if expected == "DEEPSPEED":
        assert (loaded.deepspeed_config or {})["zero_stage"] == int(config.stem[-1])


def test_configs_ship_and_unknown_names_say_which_exist():
    assert {p.stem for p in CONFIGS} >= {"deepspeed_zero2", "deepspeed_zero3", "fsdp", "multi_cpu"}
    with pytest.raises(TrainingError, match="fsdp"):
        AccelerateLauncher.named("megatron")
