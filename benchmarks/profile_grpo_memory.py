"""Where the GRPO worker's memory goes: one phase at a time, on the worker's own model set-up.

    .venv/bin/python benchmarks/profile_grpo_memory.py [--model DIR] [--batch 4] [--prompt 1100]
        [--completion 256] [--json OUT]

Loads the policy as training/grpo/worker.py does (fp32 on CPU, LoRA on every linear layer, TRL's
fused LM head), then measures each phase's peak RSS over the RSS before it (the kernel's VmHWM,
reset through /proc/self/clear_refs; freed heap is handed back with malloc_trim between phases):

- generation: `generate` of --completion new tokens for --batch prompts (no gradient);
- the policy-gradient pass: forward + backward over --batch sequences of prompt + completion, as
  GRPO's loss does (log-probabilities of the completion tokens through the fused head), with
  gradient checkpointing off and on, for the whole batch at once and one sequence at a time;
- the same pass with the full logits materialised (what a fused head saves).

Random token ids stand in for text: the memory of a pass depends on shapes, not on the tokens.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import json
import time
from pathlib import Path
from typing import Any

MODEL = Path.home() / ".cache" / "autoenvscaling" / "embedded" / "hf-base"


def _rss_mb(field: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def _settle() -> None:
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS


def phase(name: str, fn, results: dict[str, Any]) -> None:
    _settle()
    before = _rss_mb("VmRSS")
    start = time.perf_counter()
    fn()
    took = time.perf_counter() - start
    results[name] = {
        "peak_over_mb": round(_rss_mb("VmHWM") - before, 1),
        "seconds": round(took, 2),
    }
    print(f"{name}: +{results[name]['peak_over_mb']} MB in {took:.1f} s", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", type=Path, default=MODEL)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=1100)
    parser.add_argument("--completion", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0)
    parser.add_argument("--skip", default="", help="prefixes of phases to skip, separated by ;")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM
    from trl.trainer.utils import add_fused_lm_head

    from autoenvscaling.training.trl_adapter import score_labelled_positions_only

    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results: dict[str, Any] = {"shape": vars(args) | {"model": str(args.model), "json": None}}
    _settle()
    start_rss = _rss_mb("VmRSS")
    model = AutoModelForCausalLM.from_pretrained(str(args.model), dtype=torch.float32)
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))  # as GRPOTrainer does
    lora = LoraConfig(r=8, lora_alpha=16, lora_dropout=0.0, target_modules="all-linear")
    model = get_peft_model(model, lora, autocast_adapter_dtype=False)
    model.enable_input_require_grads()  # what TRL/peft do when checkpointing a LoRA model
    _settle()
    results["model_loaded_rss_mb"] = round(_rss_mb("VmRSS"), 1)
    results["model_over_python_mb"] = round(_rss_mb("VmRSS") - start_rss, 1)
    vocab = model.config.vocab_size
    seq = args.prompt + args.completion
    ids = torch.randint(100, vocab, (args.batch, seq))
    mask = torch.ones_like(ids)
    skip = set(filter(None, args.skip.split(";")))

    def generate() -> None:
        model.eval()
        with torch.no_grad():
            model.generate(
                input_ids=ids[:, : args.prompt],
                attention_mask=mask[:, : args.prompt],
                max_new_tokens=args.completion,
                min_new_tokens=args.completion,
                do_sample=True,
            )

    import trl.trainer.utils as trl_utils

    trl_cpu_head = trl_utils._use_triton  # TRL's own choice: every position on CPU

    def pg_pass(rows: int, checkpointing: bool, head: str = "compact") -> None:
        model.train()
        if checkpointing:
            model.gradient_checkpointing_enable(
                gradient_checkpointing_kwargs={"use_reentrant": True}
            )
        else:
            model.gradient_checkpointing_disable()
        trl_utils._use_triton = trl_cpu_head
        if head == "compact":
            score_labelled_positions_only()
        for start in range(0, args.batch, rows):
            batch, batch_mask = ids[start : start + rows], mask[start : start + rows]
            labels = batch.clone()
            labels[:, : args.prompt] = -100
            if head == "logits":
                logits = model(input_ids=batch, attention_mask=batch_mask).logits
                logits = logits[:, args.prompt - 1 : -1].float()
                logps = torch.log_softmax(logits, -1).gather(-1, batch[:, args.prompt :, None])
            else:
                out = model(
                    input_ids=batch, attention_mask=batch_mask, labels=labels, fused_lm_head=True
                )
                logps = out.log_probs[:, -args.completion :]
            (-logps.mean()).backward()
        model.zero_grad(set_to_none=True)

    phases = {
        "generation": generate,
        "pg, whole batch, checkpointing off, TRL's CPU head": lambda: pg_pass(
            args.batch, False, "trl"
        ),
        "pg, whole batch, checkpointing on, TRL's CPU head": lambda: pg_pass(
            args.batch, True, "trl"
        ),
        "pg, whole batch, checkpointing off, completion-only head": lambda: pg_pass(
            args.batch, False
        ),
        "pg, whole batch, checkpointing on, completion-only head": lambda: pg_pass(
            args.batch, True
        ),
        "pg, one rollout a pass, checkpointing off, completion-only head": lambda: pg_pass(
            1, False
        ),
        "pg, one rollout a pass, checkpointing on, completion-only head": lambda: pg_pass(1, True),
        "pg, whole batch, checkpointing on, full logits": lambda: pg_pass(
            args.batch, True, "logits"
        ),
    }
    # One-time costs (lazy imports, thread pools, kernel caches) land here, not in a phase.
    warm = ids[:1, :16]
    model.eval()
    with torch.no_grad():
        model.generate(input_ids=warm, attention_mask=torch.ones_like(warm), max_new_tokens=2)
    model.train()
    out = model(
        input_ids=warm, attention_mask=torch.ones_like(warm), labels=warm, fused_lm_head=True
    )
    out.log_probs.sum().backward()
    model.zero_grad(set_to_none=True)
    del out
    for name, fn in phases.items():
        if any(name.startswith(s) for s in skip):
            continue
        phase(name, fn, results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
