"""An attempt as a conversation: the model's turns, its tool calls, the tool results (capped),
and the reward.

Two sources, as the run writes them: the attempt's transcript (`transcripts/<id>.json`, every
message the model saw: system prompt, brief, revision prompts) when there is one, else the rollout
store's steps (one per tool call, plus one per reply that called none). Tool results are cut
again here, head and tail, so a page stays small whatever a command printed.
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..tools.rollouts.models import Attempt, Step
from ..tools.rollouts.transcripts import Transcript, content_text
from ..tools.text_cap import cap_text
from .run_folder import RunFolder

#: The most of one tool result a page shows (head + tail, marked).
TOOL_RESULT_BYTES = 6000


class ToolCall(BaseModel):
    name: str
    arguments: str = Field(description="JSON, indented.")


class Turn(BaseModel):
    kind: Literal["system", "user", "assistant", "tool"]
    text: str = ""
    calls: list[ToolCall] = Field(default_factory=list)
    tool_name: str | None = None
    exit_code: int | None = None
    total_bytes: int | None = Field(default=None, description="A tool result's full size.")
    truncated: bool = False


class Conversation(BaseModel):
    attempt: Attempt
    source: Literal["transcript", "steps"]
    turns: list[Turn]
    export_command: str


def export_command(run: RunFolder, attempt_id: str) -> str:
    """The `export rollouts` line that writes exactly this attempt."""
    return (
        f"autoenvscaling export rollouts {shlex.quote(str(run.root))} "
        f"--attempt {shlex.quote(attempt_id)}"
    )


def _args(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def _capped(text: str, kind: Literal["tool"], **extra: Any) -> Turn:
    capped = cap_text(text, TOOL_RESULT_BYTES)
    total = max(capped.total_bytes, extra.pop("total_bytes", None) or 0)
    return Turn(
        kind=kind,
        text=capped.text,
        total_bytes=total,
        truncated=capped.truncated or extra.pop("stored_truncated", False),
        **extra,
    )


def from_transcript(transcript: Transcript) -> list[Turn]:
    turns: list[Turn] = []
    for m in transcript.messages:
        role = m.get("role")
        if role == "tool":
            turns.append(
                _capped(content_text(m.get("content")), "tool", tool_name=m.get("name") or None)
            )
        elif role in ("system", "user"):
            turns.append(Turn(kind=role, text=content_text(m.get("content"))))
        elif role == "assistant":
            calls = [
                ToolCall(
                    name=str((c.get("function") or {}).get("name", "")),
                    arguments=_args((c.get("function") or {}).get("arguments")),
                )
                for c in m.get("tool_calls") or []
                if isinstance(c, dict)
            ]
            turns.append(Turn(kind="assistant", text=content_text(m.get("content")), calls=calls))
    return turns


def from_steps(steps: list[Step]) -> list[Turn]:
    turns: list[Turn] = []
    for step in steps:
        calls = (
            [ToolCall(name=step.tool_name, arguments=_args(step.tool_args or {}))]
            if step.tool_name
            else []
        )
        if step.message or calls:
            turns.append(Turn(kind="assistant", text=step.message or "", calls=calls))
        if step.tool_output is not None:
            turns.append(
                _capped(
                    step.tool_output,
                    "tool",
                    tool_name=step.tool_name,
                    exit_code=step.exit_code,
                    total_bytes=step.output_bytes,
                    stored_truncated=step.truncated,
                )
            )
    return turns


def conversation(run: RunFolder, attempt_id: str) -> Conversation | None:
    """The attempt's conversation, or None when the store has no such attempt."""
    store = run.store()
    if store is None:
        return None
    try:
        trajectory = store.trajectory(attempt_id)
    except KeyError:
        return None
    transcript = run.transcript(store.location, attempt_id)
    if transcript is not None:
        turns, source = from_transcript(transcript), "transcript"
    else:
        turns, source = from_steps(trajectory.steps), "steps"
    return Conversation(
        attempt=trajectory.attempt,
        source=source,
        turns=turns,
        export_command=export_command(run, attempt_id),
    )
