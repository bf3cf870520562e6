"""GPU check: a few GRPO steps on a model built from a config (no hub), with throughput and memory.

    python benchmarks/gpu_train.py                      # CUDA, Qwen2-0.5B-shaped random model
    python benchmarks/gpu_train.py --device cpu --shape tiny --steps 2   # smoke run on a laptop

The model is random (Qwen2.5-0.5B's body over a locally trained 4k BPE vocabulary), so the reward
is a cheap text score that varies between samples — this measures the trainer (generation,
log-probs, backward, optimizer), not learning. Prints one JSON object; `--out FILE` also writes it.
Sized to finish well within 8 minutes on one H200.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROMPTS = [
    "List the files in /app and count the lines of every .txt file.",
    "Write a bash one-liner that prints the ten most common words in input.txt.",
    "Create a python script that parses data.csv and prints the column sums.",
    "Find every file under /var/log that mentions error and copy it to /app/errors.",
    "Compress the folder /app/output into out.tar.gz and print its size.",
    "Print the current date in ISO format and write it to /app/date.txt.",
    "Explain how to recover a deleted git branch, then do it for branch fix.",
    "Sort the numbers in numbers.txt and write the median to /app/median.txt.",
]


def digit_and_symbol_reward(completions, **_):
    """Share of characters that look like shell (digits, / . - _ $ |): varies between samples."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        if not text:
            rewards.append(0.0)
            continue
        hits = sum(ch.isdigit() or ch in "/.-_$|" for ch in text)
        rewards.append(hits / len(text))
    return rewards


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument(
        "--shape",
        choices=["0.5b", "tiny"],
        default=None,
        help="model shape (default: 0.5b on cuda, tiny on cpu)",
    )
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--num-generations", type=int, default=8)
    parser.add_argument("--prompts-per-step", type=int, default=4)
    parser.add_argument("--max-completion-length", type=int, default=256)
    parser.add_argument("--lora", action="store_true", help="train a LoRA instead of all weights")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository: tests/
    from tests.tiny_model import TinyModelSpec, build_tiny_model

    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device: run with --device cpu for a smoke run", file=sys.stderr)
        return 2
    shape = args.shape or ("0.5b" if args.device == "cuda" else "tiny")
    spec = TinyModelSpec.qwen2_0_5b_shape() if shape == "0.5b" else TinyModelSpec()
    cuda = args.device == "cuda"
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aes-gpu-train-") as tmp:
        model_dir = build_tiny_model(Path(tmp) / "model", spec=spec, corpus=PROMPTS)
        build_sec = time.monotonic() - t0
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        # Full fine-tuning keeps fp32 master weights (bf16 autocast computes): an Adam step of
        # ~lr is below bf16's resolution for most weights and would be lost to rounding.
        model = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.bfloat16 if cuda and args.lora else torch.float32
        )
        n_params = sum(p.numel() for p in model.parameters())
        peft_config = None
        if args.lora:
            from peft import LoraConfig

            peft_config = LoraConfig(
                r=16, lora_alpha=32, target_modules="all-linear", task_type="CAUSAL_LM"
            )
        dataset = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS])
        config = GRPOConfig(
            output_dir=str(Path(tmp) / "out"),
            max_steps=args.steps,
            learning_rate=1e-5 if not args.lora else 1e-4,
            per_device_train_batch_size=args.num_generations * args.prompts_per_step,
            num_generations=args.num_generations,
            max_completion_length=args.max_completion_length,
            temperature=1.0,
            beta=0.0,
            use_cpu=not cuda,
            bf16=cuda,
            gradient_checkpointing=False,
            logging_steps=1,
            save_strategy="no",
            report_to="none",
            disable_tqdm=True,
        )
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[digit_and_symbol_reward],
            args=config,
            train_dataset=dataset,
            processing_class=tokenizer,
            peft_config=peft_config,
        )
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        before = {
            n: p.detach().float().clone()
            for n, p in trainer.model.named_parameters()
            if p.requires_grad and p.numel() < 50_000_000
        }
        t1 = time.monotonic()
        trainer.train()
        if cuda:
            torch.cuda.synchronize()
        train_sec = time.monotonic() - t1
        changed = sum(
            int(not torch.equal(before[n], p.detach().float()))
            for n, p in trainer.model.named_parameters()
            if n in before
        )

    logs = [h for h in trainer.state.log_history if "num_tokens" in h]
    total_tokens = logs[-1]["num_tokens"] if logs else 0.0
    completion_tokens = (
        sum(h.get("completions/mean_length", 0.0) for h in logs)
        * args.num_generations
        * args.prompts_per_step
    )
    report = {
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "shape": shape,
        "params_m": round(n_params / 1e6, 1),
        "lora": args.lora,
        "steps": trainer.state.global_step,
        "rollouts_per_step": args.num_generations * args.prompts_per_step,
        "max_completion_length": args.max_completion_length,
        "model_build_sec": round(build_sec, 1),
        "train_sec": round(train_sec, 1),
        "sec_per_step": round(train_sec / max(trainer.state.global_step, 1), 2),
        "tokens_total": int(total_tokens),
        "tokens_per_sec": round(total_tokens / train_sec, 1) if train_sec else None,
        "completion_tokens_per_sec": round(completion_tokens / train_sec, 1) if train_sec else None,
        "peak_gpu_mem_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2) if cuda else None,
        "peak_rss_gib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "params_changed": changed,
        "reward_per_step": [round(h.get("reward", float("nan")), 4) for h in logs],
        "loss_per_step": [h.get("loss") for h in logs],
        "torch": torch.__version__,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0 if changed else 1


if __name__ == "__main__":
    sys.exit(main())
