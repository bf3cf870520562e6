"""Tool-call demonstrations and the warm-up that teaches them: a few supervised steps on whole
one-call episodes, token for token as a GRPO episode renders them (prompt, the reply's call, the
tool turn TRL appends, the closing reply), loss on the model's own turns only.

Used by the cold-start warm-up (`training/sft/warmup.py`). Imports torch inside its functions:
only worker processes call them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from ..chat_format import END_OF_TURN


class Demo(BaseModel):
    """One warm-up demonstration: the first messages and the reply to learn after them; with
    `tool_result` and `final`, a whole one-call episode — the reply's tool call, its result as
    the episode renders it, and the reply that ends the episode (no tool call)."""

    messages: list[dict[str, Any]]
    reply: str
    tool_result: str | None = None
    final: str | None = None


def tool_suffix_ids(tokenizer, name: str, content: str) -> list[int]:
    """The ids GRPOTrainer appends after a tool call: the tool turn and the next assistant header.

    trl 1.16 (`GRPOTrainer._get_tool_suffix_ids`) renders a dummy conversation with and without
    the tool message and keeps the difference after the last EOS; the same here, so a warm-up
    episode is the token sequence a GRPO episode is.
    """
    dummy = [
        {"role": "user", "content": "dummy"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": name, "arguments": {}}}],
        },
    ]
    prefix = _ids(tokenizer.apply_chat_template(dummy, add_generation_prompt=False, tokenize=True))
    full = _ids(
        tokenizer.apply_chat_template(
            [*dummy, {"role": "tool", "name": name, "content": content}],
            add_generation_prompt=True,
            tokenize=True,
        )
    )
    eos = [i for i, token in enumerate(prefix) if token == tokenizer.eos_token_id]
    if eos:
        prefix = prefix[: eos[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise ValueError("the chat template does not preserve prefixes around a tool turn")
    return full[len(prefix) :]


def _ids(rendered) -> list[int]:
    """apply_chat_template's token ids (transformers 5 may return a BatchEncoding)."""
    return list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)


def demo_rows(tokenizer, demo: Demo, tools: list | None = None) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one demonstration, as GRPO concatenates an episode: prompt, reply,
    tool suffix, final reply. Loss on the model's own turns only (-100 elsewhere)."""
    prompt = tokenizer.apply_chat_template(
        demo.messages, tools=tools, add_generation_prompt=True, tokenize=False
    )
    p_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    r_ids = tokenizer(demo.reply + END_OF_TURN, add_special_tokens=False)["input_ids"]
    ids, labels = p_ids + r_ids, [-100] * len(p_ids) + r_ids
    if demo.tool_result is not None and demo.final is not None:
        call = json.loads(demo.reply.split("<tool_call>", 1)[1].split("</tool_call>", 1)[0])
        suffix = tool_suffix_ids(tokenizer, call["name"], demo.tool_result)
        f_ids = tokenizer(demo.final + END_OF_TURN, add_special_tokens=False)["input_ids"]
        ids += suffix + f_ids
        labels += [-100] * len(suffix) + f_ids
    return ids, labels


def warm_up(
    model,
    tokenizer,
    examples: Sequence[Demo | tuple[list[dict], str]],
    *,
    steps: int = 200,
    lr: float = 3e-3,
    seed: int = 0,
    tools: list | None = None,
) -> float:
    """Teach the model each demonstration's replies (`Demo`, or `(messages, reply)`).

    Returns the final loss. A few hundred steps make a random model emit well-formed tool calls
    most of the time while still sampling different commands: real variance for GRPO.
    """
    import torch

    rng = random.Random(seed)
    torch.manual_seed(seed)
    demos = [e if isinstance(e, Demo) else Demo(messages=e[0], reply=e[1]) for e in examples]
    rows = [demo_rows(tokenizer, demo, tools) for demo in demos]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    model.train()
    loss_value = float("nan")
    batch_size = min(8, len(rows))
    for _ in range(steps):
        batch = rng.sample(rows, batch_size)
        width = max(len(ids) for ids, _ in batch)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(i)) + i for i, _ in batch])
        labels = torch.tensor([[-100] * (width - len(lab)) + lab for _, lab in batch])
        mask = torch.tensor([[0] * (width - len(i)) + [1] * len(i) for i, _ in batch])
        loss = model(input_ids=input_ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        loss_value = float(loss.detach())
    model.eval()
    return loss_value


def demo_logprobs(model, tokenizer, demos: list[Demo], tools: list | None = None) -> list[dict]:
    """Per demonstration, the model's log-probability of its reply (the first call) and of its
    closing reply: how a warm-up left the choice between demonstrated commands (GRPO needs a
    group's samples to differ) and whether the model stops after the call."""
    import torch

    out = []
    for demo in demos:
        ids, labels = demo_rows(tokenizer, demo, tools)
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
        token_lp = torch.log_softmax(logits, -1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]
        learned = [i for i, label in enumerate(labels[1:]) if label != -100]
        runs: list[list[int]] = []  # contiguous labelled runs: the reply, then the closing reply
        for i in learned:
            if runs and runs[-1][-1] == i - 1:
                runs[-1].append(i)
            else:
                runs.append([i])
        sums = [round(float(token_lp[run].sum()), 3) for run in runs]
        out.append({"reply": sums[0], "final": sums[1] if len(sums) > 1 else None})
    return out
