"""GPU check: the cold start's SFT job, exactly as `autoenvscaling cold-start` builds it, on CUDA.

    python benchmarks/gpu_sft.py --model-files DIR --cache ~/.cache/autoenvscaling/embedded/cold-start

The job runs through the real path (TRLSFTBackend: the SFT worker subprocess, TRL's SFTTrainer,
publication through the checkpoint registry) on the train set a cold start wrote
(`cold-start-train.jsonl`) with the settings its card records (`card.json`: LoRA rank, batch,
token cap, learning rate; one step per batch of rows), as graphs/cold_start/start.py builds the job.
The graphs package is not imported: a GPU machine needs only the training extra. A machine without the hub gets the weights another way: `--model-files` holds the
base model's config and tokenizer files, and the weights are drawn at random from that config
(`--random-weights`, the default when DIR has no weights), which leaves the step's cost — what
this measures — as it is. Prints one JSON object: seconds, steps, seconds per step, tokens seen,
the device the worker reported, and the worker's first/last loss.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import tempfile
import time
from pathlib import Path

from autoenvscaling.training.backend import TrainHyperParams
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.sft.trl_backend import SFTJob, TRLSFTBackend


def random_model(files: Path, into: Path) -> Path:
    """`files`' config and tokenizer, with weights drawn from the config (bf16)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    into.mkdir(parents=True, exist_ok=True)
    for path in files.iterdir():
        if path.is_file() and not path.name.endswith((".safetensors", ".bin", ".gguf")):
            shutil.copy2(path, into / path.name)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(files))
    model.to(torch.bfloat16).save_pretrained(into)
    return into


async def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--model-files", type=Path, required=True)
    parser.add_argument(
        "--cache", type=Path, required=True, help="a cold start's folder: card + train set"
    )
    parser.add_argument("--steps", type=int, default=None, help="default: one per row")
    parser.add_argument("--device", choices=["cuda", "cpu", "auto"], default="cuda")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    settings = json.loads((args.cache / "card.json").read_text())["settings"]
    train_set = args.cache / "cold-start-train.jsonl"
    rows = [line for line in train_set.read_text().splitlines() if line.strip()]
    steps = args.steps or max(1, len(rows) // settings["batch_size"])
    with tempfile.TemporaryDirectory(prefix="gpu-sft-") as scratch:
        root = Path(scratch)
        has_weights = any(p.suffix in (".safetensors", ".bin") for p in args.model_files.iterdir())
        base = args.model_files if has_weights else random_model(args.model_files, root / "base")
        job = SFTJob(
            job_id="gpu-cold-start",
            base_model=str(base),
            dataset=train_set,
            work_dir=root / "job",
            batch_size=settings["batch_size"],
            max_length=settings["max_length"],
            hyper=TrainHyperParams(
                steps=steps,
                learning_rate=settings["learning_rate"],
                lora_rank=settings["lora_rank"],
                lora_alpha=2 * settings["lora_rank"],
                gradient_checkpointing=settings["gradient_checkpointing"],
                trl_config=settings.get("trl_config") or {},
                device=args.device,
            ),
        )
        started = time.monotonic()
        result = await TRLSFTBackend(CheckpointRegistry(root / "registry")).train(job)
        seconds = time.monotonic() - started
    report = {
        "weights": "from the files" if has_weights else "random, from the config",
        "rows": len(rows),
        "steps": steps,
        "seconds": round(seconds, 1),
        "seconds_per_step": round(seconds / steps, 3),
        "published": result.checkpoint is not None,
        "reason": result.reason,
        **{
            k: result.metrics.get(k)
            for k in ("device", "first_loss", "last_loss", "param_change_l2", "examples")
        },
    }
    print(json.dumps(report))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0 if result.checkpoint is not None else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
