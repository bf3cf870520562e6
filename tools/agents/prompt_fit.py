"""Does a first prompt fit the model's context window? A cheap, dependency-free token estimate.

The estimate is characters / 3, rounded up, plus a fixed allowance per message for the chat
template. Measured against the embedded llama.cpp server's own count of whole proposer first
prompts (system prompt, brief, tool schemas as compact JSON): 15,194 characters = 3924 tokens
(3.9 per token; estimate 5.1k) and 18.4k characters = 5456 tokens (3.4; estimate 6131), so it
errs on the safe side for whole prompts; code and tables alone run ~2 characters per token, and
the quarter of the window left free (RESERVE_FRACTION) absorbs a brief that is mostly code. A
real tokenizer would need the model's files or a round trip to the server per candidate prompt.
"""

from __future__ import annotations

import json
import math
from typing import Any

CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 16
"""Role markers and separators a chat template adds around each message."""
RESERVE_FRACTION = 4
"""The first prompt leaves a quarter of the window free: for the replies and tool results of the
episode's next turns, not just one reply (a prompt that leaves room for a single 384-token reply
ends the episode at its second call, with a full context)."""


class ContextWindowError(ValueError):
    """The smallest prompt a role can start from does not fit its model's context window."""


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def prompt_tokens(messages: list[str], tools: list[dict[str, Any]] | None = None) -> int:
    """Estimated tokens of a first prompt: its message texts plus the tools' JSON schemas."""
    schema_text = json.dumps(tools, separators=(",", ":")) if tools else ""
    return (
        sum(estimate_tokens(m) for m in messages)
        + estimate_tokens(schema_text)
        + MESSAGE_OVERHEAD_TOKENS * (len(messages) + 1)
    )


def reply_reserve(window: int) -> int:
    """Tokens the first prompt leaves free: a quarter of the window (see RESERVE_FRACTION). A
    longer max_tokens is cut to what the prompt leaves (`reply_cap`), never reserved in full."""
    return max(1, window // RESERVE_FRACTION)


def reply_cap(prompt: int, max_tokens: int, window: int) -> int:
    """The max_tokens to send with a prompt of `prompt` tokens: what is left, at most the cap."""
    return max(1, min(max_tokens, window - prompt))


def too_large(role: str, needed: int, window: int, reserve: int) -> ContextWindowError:
    return ContextWindowError(
        f"the {role}'s prompt needs at least {needed} tokens (estimated) plus {reserve} for the "
        f"replies; the model's context window is {window}: use a model with a larger window, "
        f"a smaller max_tokens, or fewer tools"
    )
