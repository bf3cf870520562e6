"""The policy as every trainer process loads it (GRPO, SFT, proposer), so all make one kind of
checkpoint: the device, the model (its LoRA adapter or merged weights), a tokenizer whose chat
template TRL renders tools with and parses tool calls from. Workers only (torch inside)."""

from __future__ import annotations

from .backend import TrainJob
from .chat_format import CHATML_TOKENS, END_OF_TURN, tool_chat_template
from .worker_protocol import emit


def device_of(job: TrainJob) -> str:
    import torch

    if job.hyper.device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if job.hyper.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device='cuda' was asked for but torch sees no CUDA device")
    return job.hyper.device


def ensure_tool_template(tokenizer) -> str | None:
    """Make the chat template one TRL can render tools with and parse tool calls from.

    A known tool-capable template is kept. A ChatML tokenizer whose template has no tool support
    (SmolLM2, the embedded default) gets TRL's Qwen2.5 template, which is ChatML plus the
    `<tool_call>` JSON format. Returns a note when the template was replaced.
    """
    from trl.chat_template_utils import add_response_schema, supports_tool_calling

    if tokenizer.chat_template and supports_tool_calling(tokenizer):
        try:
            add_response_schema(tokenizer)
            return None
        except ValueError:
            pass  # tool-capable but unknown to TRL's parsers: fall through
    vocab = tokenizer.get_vocab()
    if all(token in vocab for token in CHATML_TOKENS):
        # The policy's chat format, the one its server renders with (training/chat_format.py).
        tokenizer.chat_template = tool_chat_template()
        tokenizer.eos_token = END_OF_TURN  # ChatML turns end here; generation must stop here
        add_response_schema(tokenizer)
        return (
            "the model's chat template has no tool calling TRL can parse; using TRL's "
            "Qwen2.5 ChatML template (tool calls as <tool_call> JSON)"
        )
    raise ValueError(
        "the base model's chat template supports no tool calling TRL can parse and "
        "the tokenizer is not ChatML: give the model a tool-capable chat template"
    )


def load_policy(job: TrainJob, device: str):
    """(model, tokenizer, peft_config, kind, base_of_new_checkpoint) for this job."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    hyper, parent = job.hyper, job.parent
    model_path = (
        str(parent.path) if parent is not None and parent.kind == "full" else job.base_model
    )
    # bf16 weights only for a frozen LoRA base; trained weights stay fp32 (bf16 autocast computes)
    # because an Adam step of ~lr is below bf16's resolution and would be rounded away.
    dtype = torch.bfloat16 if device == "cuda" and hyper.lora else torch.float32
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    tokenizer.padding_side = "left"
    note = ensure_tool_template(tokenizer)
    if note:
        emit("load", job.job_id, message=note)
    if tokenizer.pad_token is None:
        vocab = tokenizer.get_vocab()
        tokenizer.pad_token = "<|endoftext|>" if "<|endoftext|>" in vocab else tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=dtype)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    peft_config = None
    if parent is not None and parent.kind == "lora":
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, str(parent.path), is_trainable=hyper.lora)
        if not hyper.lora:  # full fine-tuning continues from the merged weights
            model = model.merge_and_unload()
            model.requires_grad_(True)  # peft froze the base weights when it loaded the adapter
    elif hyper.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=hyper.lora_rank,
            lora_alpha=hyper.lora_alpha,
            lora_dropout=0.0,
            target_modules=hyper.lora_target_modules,
            task_type="CAUSAL_LM",
        )
    kind = "lora" if hyper.lora else "full"
    return model, tokenizer, peft_config, kind, model_path
