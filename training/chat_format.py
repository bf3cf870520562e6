"""The policy's chat format, declared once: the template both sides render with, and its tool calls.

A policy is trained on the token ids the trainer builds from a conversation and acts on the ids its
server builds from the same conversation; if the two differ the policy learns one interface and
acts in another (the embedded server once dropped every tool result on the floor). So:
- **the template** is TRL's Qwen2.5 tool template (`trl/chat_templates/qwen2_5.jinja`: ChatML plus
  tool schemas in the system turn, `<tool_call>` JSON for calls, `<tool_response>` for results),
  read from TRL's own file: no copy of it lives here. TRL's trainers recognise that exact text
  (their response parser for it is built in), and it only needs ChatML's special tokens, which
  SmolLM2 (the embedded policy) has; SmolLM2's own template renders no tools at all. The trainer
  puts it on the tokenizer (`training/policy_loading.py`), the embedded server renders every request
  with it (`training/serving/embedded_serve.py`), and a vLLM server gets it with `--chat-template`
  (`write_tool_template`, README);
- **wire -> template**: what an OpenAI client sends (tool-call arguments as JSON strings, `null`
  content on tool-calling turns) becomes what the template and the trainer's dicts hold, as vLLM
  does before it renders;
- **tool calls** are parsed from a reply the way TRL's response schema for this template parses
  them (each `<tool_call>...</tool_call>` block a JSON object with `name` and `arguments`).
Import-light: no torch, no TRL import (TRL's file is found, not imported).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

TEMPLATE_NAME = "qwen2_5"
"""TRL's name for the template file (`trl/chat_templates/<name>.jinja`)."""

CHATML_TOKENS = ("<|im_start|>", "<|im_end|>")
"""The special tokens the template writes: the tokenizer must have both as single tokens."""

END_OF_TURN = "<|im_end|>"

_TOOL_CALL = re.compile(r"<tool_call>\s*(.+?)\s*</tool_call>", re.DOTALL)


class ChatFormatError(RuntimeError):
    """The tool template cannot be found or used; the message says what to install or change."""


def template_path() -> Path:
    """TRL's template file, found without importing TRL (the server process has no torch)."""
    spec = importlib.util.find_spec("trl")
    roots = list(spec.submodule_search_locations or []) if spec else []
    for root in roots:
        path = Path(root) / "chat_templates" / f"{TEMPLATE_NAME}.jinja"
        if path.is_file():
            return path
    raise ChatFormatError(
        f"TRL's {TEMPLATE_NAME}.jinja chat template was not found: the policy's chat format is "
        "TRL's tool template; install the `train` extra (trl)"
    )


def tool_chat_template() -> str:
    """The template text, exactly as TRL reads it (`trl.chat_template_utils.qwen2_5_chat_template`)."""
    return template_path().read_text(encoding="utf-8")


def write_tool_template(dest: Path) -> Path:
    """Write the template to `dest` (for `vllm serve --chat-template dest`)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(tool_chat_template(), encoding="utf-8")
    return dest


def wire_to_template(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """OpenAI wire messages -> the dicts the template renders (and the trainer builds): tool-call
    arguments parsed from their JSON strings (the template `tojson`s a dict), `null` content "".
    Arguments that are not a JSON object are kept as sent (the template then shows them as text)."""
    out = []
    for message in messages:
        entry = dict(message)
        if entry.get("content") is None:
            entry["content"] = ""
        calls = entry.get("tool_calls")
        if calls:
            entry["tool_calls"] = [_parsed_call(call) for call in calls]
        out.append(entry)
    return out


def _parsed_call(call: dict[str, Any]) -> dict[str, Any]:
    function = dict(call.get("function") or {})
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            function["arguments"] = parsed
    return {**call, "function": function}


class ParsedCall(BaseModel):
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ParsedReply(BaseModel):
    """A generated reply split as TRL's response parser splits it."""

    content: str
    tool_calls: list[ParsedCall] = Field(default_factory=list)
    error: str | None = Field(default=None, description="Why a `<tool_call>` is not a call.")


def parse_reply(text: str) -> ParsedReply:
    """Content before the first `<tool_call>`, and every well-formed call. A block that is not a
    JSON object with a string `name` is not a call: the whole reply stays content, so the model
    sees what it wrote and the trainer (which would fail to parse it too) agrees; `error` says
    why (the proposer is told it)."""
    text = text.removesuffix(END_OF_TURN)
    blocks = list(_TOOL_CALL.finditer(text))
    calls: list[ParsedCall] = []
    for block in blocks:
        try:
            payload = json.loads(block.group(1))
        except ValueError as exc:
            return ParsedReply(content=text, error=f"a <tool_call> block is not valid JSON ({exc})")
        if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
            return ParsedReply(
                content=text, error='a <tool_call> block is not a JSON object with a "name"'
            )
        arguments = payload.get("arguments") or {}
        if not isinstance(arguments, dict):
            return ParsedReply(
                content=text, error='a <tool_call> block\'s "arguments" is not a JSON object'
            )
        calls.append(ParsedCall(name=payload["name"], arguments=arguments))
    if not calls:
        unclosed = "<tool_call>" in text
        return ParsedReply(
            content=text,
            error="a <tool_call> block is never closed with </tool_call>" if unclosed else None,
        )
    return ParsedReply(content=text[: blocks[0].start()].rstrip("\n"), tool_calls=calls)


__all__ = [
    "CHATML_TOKENS",
    "END_OF_TURN",
    "TEMPLATE_NAME",
    "ChatFormatError",
    "ParsedCall",
    "ParsedReply",
    "parse_reply",
    "template_path",
    "tool_chat_template",
    "wire_to_template",
    "write_tool_template",
]
