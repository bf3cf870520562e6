"""Attempt transcripts: the whole conversation a role saw, in chat-template form, next to the store.

The rollout store keeps one row per tool call, which is enough for reports but not for training:
the system prompt, the brief and the revision prompts between episodes are not in it. A transcript
keeps every message and the tool schemas the model was given, as the chat dicts a Hugging Face
chat template renders (`role`, `content`, `tool_calls` with dict arguments, `tool_call_id`), so the
SFT export and the proposer's GRPO update read exactly what the model read.

Layout: `<folder of rollouts.db>/transcripts/<attempt id>.json`, written atomically; with a
PostgreSQL store (a `postgresql://` URL), a row of its `transcripts` table, so every machine that
reaches the database reads them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ..files.whole import write_whole
from .connection import StoreConnection
from .postgres import is_postgres_url

TRANSCRIPTS_DIR = "transcripts"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class Transcript(BaseModel):
    """One attempt's conversation and the tools it was offered."""

    attempt_id: str
    messages: list[dict[str, Any]] = Field(description="Chat dicts, system prompt first.")
    tools: list[dict[str, Any]] = Field(
        default_factory=list, description="OpenAI function schemas."
    )


def transcript_path(store_path: str | os.PathLike[str], attempt_id: str) -> Path:
    if not _ID_RE.match(attempt_id):
        raise ValueError(f"invalid attempt id {attempt_id!r} for a transcript file name")
    return Path(store_path).parent / TRANSCRIPTS_DIR / f"{attempt_id}.json"


def save_transcript(store_path: str | os.PathLike[str], transcript: Transcript) -> Path | None:
    """Write the transcript; returns its file (None in a PostgreSQL store)."""
    if is_postgres_url(str(store_path)):
        _pg_save(str(store_path), transcript)
        return None
    path = transcript_path(store_path, transcript.attempt_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, transcript.model_dump_json())
    return path


def load_transcript(store_path: str | os.PathLike[str], attempt_id: str) -> Transcript | None:
    """The attempt's transcript, or None when it was never written (or is unreadable)."""
    if is_postgres_url(str(store_path)):
        return _pg_load(str(store_path), attempt_id)
    try:
        path = transcript_path(store_path, attempt_id)
        return Transcript.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _pg_save(url: str, transcript: Transcript) -> None:
    with StoreConnection(url) as store, store._write() as conn:
        conn.execute(
            "INSERT INTO transcripts (attempt_id, body) VALUES (?, ?) "
            "ON CONFLICT (attempt_id) DO UPDATE SET body = excluded.body",
            (transcript.attempt_id, transcript.model_dump_json()),
        )


def _pg_load(url: str, attempt_id: str) -> Transcript | None:
    with StoreConnection(url, read_only=True) as store:
        row = (
            store._conn()
            .execute("SELECT body FROM transcripts WHERE attempt_id = ?", (attempt_id,))
            .fetchone()
        )
    try:
        return Transcript.model_validate_json(row[0]) if row else None
    except ValueError:
        return None


def content_text(content: Any) -> str:
    """A message's content as text: a list of blocks joined, None as "".

    An image block (an MCP screenshot, as LangChain's `image` block) is `[image <mime type>]`:
    the text policy reads that, beside the text block its tool writes, wherever a conversation
    becomes text (the served loop, the transcript, the SFT and GRPO data)."""
    if isinstance(content, list):
        return "\n".join(_block_text(b) for b in content)
    return "" if content is None else str(content)


def _block_text(block: Any) -> str:
    if not isinstance(block, dict):
        return str(block)
    if block.get("type") in ("image", "image_url"):
        return f"[image {str(block.get('mime_type') or 'image')[:40]}]"
    return str(block.get("text", ""))


def chat_messages(messages: Sequence[Any]) -> list[dict[str, Any]]:
    """LangChain messages -> chat-template dicts (what an OpenAI-compatible server templates).

    Tool-call arguments stay dicts (chat templates `tojson` them); ids are kept for pairing.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        kind = getattr(message, "type", None)
        if kind == "system":
            out.append({"role": "system", "content": content_text(message.content)})
        elif kind == "human":
            out.append({"role": "user", "content": content_text(message.content)})
        elif kind == "ai":
            entry: dict[str, Any] = {"role": "assistant", "content": content_text(message.content)}
            calls = getattr(message, "tool_calls", None) or []
            if calls:
                entry["tool_calls"] = [
                    {
                        "id": call.get("id") or f"call_{len(out)}_{i}",
                        "type": "function",
                        "function": {"name": call["name"], "arguments": dict(call["args"])},
                    }
                    for i, call in enumerate(calls)
                ]
            out.append(entry)
        elif kind == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": message.tool_call_id,
                    "name": getattr(message, "name", None) or "",
                    "content": content_text(message.content),
                }
            )
        else:
            raise ValueError(f"cannot put a {type(message).__name__} into a transcript")
    return out


def normalized(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages as a chat template sees them: no ids or tool names, arguments parsed, null
    content as "" — for comparing a transcript with what a server received."""
    out = []
    for m in messages:
        entry: dict[str, Any] = {"role": m["role"], "content": content_text(m.get("content"))}
        if m.get("tool_calls"):
            entry["tool_calls"] = [
                {
                    "name": c["function"]["name"],
                    "arguments": json.loads(c["function"]["arguments"])
                    if isinstance(c["function"]["arguments"], str)
                    else dict(c["function"]["arguments"]),
                }
                for c in m["tool_calls"]
            ]
        out.append(entry)
    return out
