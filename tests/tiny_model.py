"""A small random Qwen2 policy and a locally trained tokenizer: no hub, built in seconds.

A test helper, not part of the package: used by the training tests and by the GPU check
(`benchmarks/gpu_train.py`, scaled up through `TinyModelSpec`). The tokenizer is a ByteLevel
BPE trained on a built-in corpus (shell, JSON tool calls, chat markers) with TRL's bundled Qwen2.5
chat template, so TRL recognises its tool-call format. The package's `warm_up`
(`training/sft/demos.py`) optionally teaches the random model, by a few hundred plain next-token
steps, to answer in that tool-call format: then GRPO episodes really call the sandbox's bash tool
and rewards vary between rollouts.

Imports torch inside its functions.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, Field

from autoenvscaling.training.sft.demos import Demo, warm_up

IM_START, IM_END, EOT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
TOOL_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<tools>",
    "</tools>",
]

_CORPUS_SEED = [
    "You are a helpful assistant. You are Qwen, created by Alibaba Cloud.",
    "# Tools\n\nYou may call one or more functions to assist with the user query.",
    "You are provided with function signatures within <tools></tools> XML tags:",
    (
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:"
    ),
    (
        '{"type": "function", "function": {"name": "run", "description": "Run a bash command in the terminal.", '
        '"parameters": {"type": "object", "properties": {"command": {"type": "string"}}, '
        '"required": ["command"]}, "return": {"type": "string"}}}'
    ),
    "Write the answer into /app/answer.txt. Create the file /app/hello.txt containing hello.",
    "ls -la /app && cat /app/input.txt | sort | uniq -c > /app/out.txt; echo done",
    "python3 -c 'print(1 + 2)'; grep -r error /var/log; head -n 5 data.csv; wc -l file.txt",
    "mkdir -p /app/output && cp /app/input/* /app/output/ && chmod +x run.sh && ./run.sh",
    "the quick brown fox jumps over the lazy dog 0 1 2 3 4 5 6 7 8 9 exit code output",
]


class TinyModelSpec(BaseModel):
    """Shape of the random Qwen2 model. The defaults train 2 GRPO steps on 2 CPU cores in seconds."""

    vocab_size: int = Field(
        default=768, description="Target BPE vocabulary (the real size may be smaller)."
    )
    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 2
    num_attention_heads: int = 2
    num_key_value_heads: int = 1
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = True
    seed: int = 0

    @classmethod
    def qwen2_0_5b_shape(cls) -> TinyModelSpec:
        """Qwen2.5-0.5B's body (24 layers, hidden 896, GQA 14/2) over our small vocabulary."""
        return cls(
            vocab_size=4096,
            hidden_size=896,
            intermediate_size=4864,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            max_position_embeddings=4096,
        )


def tool_call_reply(command: str, name: str = "run") -> str:
    """An assistant reply in the Qwen2.5 tool-call format (what the template renders)."""
    payload = json.dumps({"name": name, "arguments": {"command": command}})
    return f"<tool_call>\n{payload}\n</tool_call>"


def build_tokenizer(extra_corpus: list[str] | None = None, vocab_size: int = 768):
    """ByteLevel BPE trained on the built-in corpus (+ extra text), wrapped for transformers."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from autoenvscaling.training.chat_format import tool_chat_template

    corpus = _CORPUS_SEED + list(extra_corpus or [])
    corpus += [tool_call_reply(c) for c in ("ls", "cat /app/answer.txt", "echo 1 > /app/out.txt")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT, IM_START, IM_END],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(corpus * 4, trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,
        pad_token=EOT,
        padding_side="left",
        additional_special_tokens=[IM_START, IM_END],
    )
    # Tool markers are plain added tokens (not special): decoding keeps them for the parser.
    fast.add_tokens(TOOL_TOKENS)
    fast.chat_template = tool_chat_template()  # the policy's chat format
    return fast


def build_model(tokenizer, spec: TinyModelSpec):
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(spec.seed)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=spec.hidden_size,
        intermediate_size=spec.intermediate_size,
        num_hidden_layers=spec.num_hidden_layers,
        num_attention_heads=spec.num_attention_heads,
        num_key_value_heads=spec.num_key_value_heads,
        max_position_embeddings=spec.max_position_embeddings,
        tie_word_embeddings=spec.tie_word_embeddings,
        bos_token_id=None,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


def build_tiny_model(
    out_dir: Path | str,
    *,
    spec: TinyModelSpec | None = None,
    corpus: list[str] | None = None,
    warmup_examples: list[Demo | tuple[list[dict], str]] | None = None,
    warmup_steps: int = 200,
    warmup_tools: list | None = None,
) -> Path:
    """Build tokenizer + random Qwen2 (+ optional warm-up) and save both to `out_dir`."""
    spec = spec or TinyModelSpec()
    out = Path(out_dir)
    extra = list(corpus or [])
    for example in warmup_examples or []:
        demo = example if isinstance(example, Demo) else Demo(messages=example[0], reply=example[1])
        extra += [m["content"] for m in demo.messages] + [demo.reply]
        extra += [text for text in (demo.tool_result, demo.final) if text]
    tokenizer = build_tokenizer(extra, vocab_size=spec.vocab_size)
    model = build_model(tokenizer, spec)
    if warmup_examples:
        warm_up(
            model,
            tokenizer,
            warmup_examples,
            steps=warmup_steps,
            seed=spec.seed,
            tools=warmup_tools,
        )
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
