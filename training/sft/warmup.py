"""Cold-start warm-up: a few supervised steps that teach a policy the tool-call format.

Small instruct models (the embedded SmolLM2-135M among them) rarely emit tool calls in the format
TRL parses, so every GRPO rollout scores alike and nothing is learned. A short SFT on tool-call
demonstrations (loss on the reply only) fixes the format while sampling still varies.

    python -m autoenvscaling.training.sft.warmup --base HF_DIR --out HF_DIR --demos demos.json

`demos.json`: [{"messages": [{"role": ..., "content": ...}, ...], "reply": "<tool_call>...",
"tool_result": "...", "final": "..."}] (`sft.demos.Demo`; with `tool_result` and `final`, a
whole one-call episode, so the policy also learns to stop after its call).
Runs in its own process (it imports torch); the graph process never does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..grpo.episode_env import prompt_tools
from ..policy_loading import ensure_tool_template
from .demos import Demo, demo_logprobs, warm_up


def warm_up_model(
    base: Path, out: Path, demos: list[dict], *, steps: int = 30, lr: float = 5e-5, seed: int = 0
) -> dict:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base)
    ensure_tool_template(tokenizer)  # the template GRPO will render and parse tool calls with
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    examples = [Demo.model_validate(d) for d in demos]
    loss = warm_up(model, tokenizer, examples, steps=steps, lr=lr, seed=seed, tools=prompt_tools())
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return {
        "out": str(out),
        "final_loss": loss,
        "demo_logprobs": demo_logprobs(model, tokenizer, examples, tools=prompt_tools()),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").strip().split("\n")[0])
    parser.add_argument("--base", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--demos", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=5e-5)
    args = parser.parse_args(argv)
    summary = warm_up_model(
        args.base, args.out, json.loads(args.demos.read_text()), steps=args.steps, lr=args.lr
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
