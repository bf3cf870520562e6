"""Cold start: `autoenvscaling train --sft DATASET` (TRL SFTTrainer, LoRA) on a tiny local model.

The run is real (a subprocess worker, real optimizer steps, the checkpoint registry); the test
insists that the weights changed, the checkpoint was published and made current, that TRL's
SFTTrainer reads the exported dataset unchanged (its tokens are the chat template's rendering of
the example), and that after the swap both roles' model configs name the new checkpoint.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.main import app
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.sft.data import SFTExample, to_hf_dataset

pytestmark = [
    pytest.mark.train,
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None or importlib.util.find_spec("trl") is None,
        reason="the train extra is not installed (pip install -e '.[train]'): torch/trl missing",
    ),
]

JOBS = [
    ("Write hello into /app/hello.txt.", "echo hello > /app/hello.txt"),
    (
        "Count the lines of /app/data.csv into /app/count.txt.",
        "wc -l < /app/data.csv > /app/count.txt",
    ),
    ("List /app into /app/ls.txt.", "ls /app > /app/ls.txt"),
]


def _examples() -> list[SFTExample]:
    from autoenvscaling.graphs.cold_start.solver_replay import served_solver_interface

    interface = asyncio.run(served_solver_interface())
    out = []
    for i, (instruction, command) in enumerate(JOBS):
        result = {"exit_code": 0, "output": "", "output_bytes": 0, "truncated": False}
        out.append(
            SFTExample(
                messages=[
                    {"role": "system", "content": interface.system_prompt},
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
                    {"role": "tool", "tool_call_id": "call_0", "content": json.dumps(result)},
                    {"role": "assistant", "content": "Done."},
                ],
                tools=interface.tools,
                role="solver",
                task_id=f"t{i}",
                source="seed-replay",
                reward=1.0,
            )
        )
    return out


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    from tests.tiny_model import build_tiny_model

    torch.set_num_threads(1)
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny")


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sft") / "dataset"
    to_hf_dataset(_examples()).save_to_disk(str(path))
    return path


def test_sft_trainer_reads_the_dataset_unchanged(tiny_model: Path, dataset: Path) -> None:
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    data = datasets.load_from_disk(str(dataset))
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    trainer = SFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(tiny_model),
        args=SFTConfig(output_dir="/tmp/unused", use_cpu=True, report_to="none", max_length=4096),
        train_dataset=data,
        processing_class=tokenizer,
    )
    row = data[0]
    expected = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=True)
    if not isinstance(expected, list):  # transformers 5 returns a BatchEncoding
        expected = expected["input_ids"]
    assert trainer.train_dataset[0]["input_ids"] == list(expected)
    text = tokenizer.decode(trainer.train_dataset[0]["input_ids"])
    assert '"name": "run"' in text and "echo hello > /app/hello.txt" in text


@pytest.mark.timeout(300)
async def test_sft_publishes_a_checkpoint_both_roles_use(
    tiny_model: Path, dataset: Path, tmp_path: Path
) -> None:
    registry_dir = tmp_path / "registry"
    args = [
        "train",
        "--sft",
        str(dataset),
        "--base",
        str(tiny_model),
        "--registry",
        str(registry_dir),
        "--steps",
        "4",
        "--lr",
        "5e-3",
        "--threads",
        "1",
        "--json",
    ]
    result = await asyncio.to_thread(CliRunner().invoke, app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout[result.stdout.index("{") :])
    ckpt_id = out["checkpoint"]["id"]
    registry = CheckpointRegistry(registry_dir)
    assert registry.current_id() == ckpt_id
    ckpt = registry.get(ckpt_id)
    assert (ckpt.kind, ckpt.base_model, ckpt.parent_id) == ("lora", str(tiny_model), None)
    metrics = out["metrics"]
    assert out["steps_done"] == 4 and metrics["examples"] == len(JOBS)
    assert metrics["param_change_l2"] > 0
    assert metrics["last_loss"] < metrics["first_loss"], metrics["log_history"]
    from safetensors.torch import load_file

    tensors = load_file(str(ckpt.path / "adapter_model.safetensors"))
    assert sum(float(t.norm()) for n, t in tensors.items() if "lora_B" in n) > 0

    # The swap: served under its id, named by both roles' model configs.
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.measure import role_model
    from autoenvscaling.graphs.models import Policy, adopt_checkpoint
    from autoenvscaling.training.serving.vllm_server import VLLMPolicyServer
    from tests.test_training_vllm_contract import FakeVLLM, Served, _ask

    with Served(FakeVLLM(runtime_lora=True, dev_mode=False)) as srv:
        server = VLLMPolicyServer(srv.base_url, "tiny-base")
        policy = await adopt_checkpoint(registry.current(), server, Policy())
        ctx = FlywheelContext()
        proposer = role_model(ctx, policy, "proposer")
        solver = role_model(ctx, policy, "solver")
        assert proposer.model == solver.model == f"openai:{ckpt_id}"
        assert proposer.base_url == solver.base_url == srv.base_url
        assert policy.checkpoint_id == policy.version == ckpt_id
        assert _ask(server.current()) == f"weights={ckpt.path}"
