"""A candidate's revisions and the diff between them, replayed from the proposer's transcript.

A proposer revises its candidate folder in place, so the folder holds only the last revision.
The transcript holds every episode: the first after the brief, one more after each rejection
(a user message carrying the gate's verdict). Within an episode the files the model wrote are
its `write_file` calls, its `edit_file` calls applied to what it wrote before, and, in the
one-reply arms, the `<file path="...">` blocks of its reply. Files changed through terminal
commands cannot be replayed: the page says how many such calls an episode made.
"""

from __future__ import annotations

import difflib
import json
import re
from typing import Any

from pydantic import BaseModel, Field

from ..tools.rollouts.transcripts import Transcript

_BLOCK = re.compile(r'<file path="([^"\n]+)">\n?(.*?)</file>', re.DOTALL)
_WRITES = {"write_file", "edit_file"}


class FileDiff(BaseModel):
    path: str
    status: str = Field(description="added, changed or removed")
    diff: str


class Revision(BaseModel):
    """The files as they stood at the end of one episode, and what changed since the last."""

    number: int = Field(description="0: the first submission; n: after the n-th rejection.")
    files: dict[str, str]
    diffs: list[FileDiff] = Field(default_factory=list)
    terminal_calls: int = Field(default=0, description="Terminal commands (not replayed).")
    feedback: str = Field(default="", description="The rejection that opened this revision.")


def _arguments(call: dict[str, Any]) -> dict[str, Any]:
    args = (call.get("function") or {}).get("arguments")
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return {}
    return args if isinstance(args, dict) else {}


def _apply(files: dict[str, str], call: dict[str, Any]) -> bool:
    """Apply one tool call to `files`; False when it cannot be replayed."""
    name = (call.get("function") or {}).get("name")
    args = _arguments(call)
    path = args.get("path")
    if name not in _WRITES or not isinstance(path, str):
        return False
    if name == "write_file" and isinstance(args.get("content"), str):
        files[path] = args["content"]
        return True
    old, new = args.get("old_text"), args.get("new_text")
    if name == "edit_file" and isinstance(old, str) and isinstance(new, str) and path in files:
        files[path] = files[path].replace(old, new, 1)
        return True
    return False


def _diffs(before: dict[str, str], after: dict[str, str]) -> list[FileDiff]:
    out = []
    for path in sorted(before.keys() | after.keys()):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        status = "added" if a is None else "removed" if b is None else "changed"
        lines = difflib.unified_diff(
            (a or "").splitlines(keepends=True),
            (b or "").splitlines(keepends=True),
            fromfile=f"a/{path}",
            tofile=f"b/{path}",
        )
        out.append(FileDiff(path=path, status=status, diff="".join(lines)))
    return out


def revisions(transcript: Transcript) -> list[Revision]:
    """One `Revision` per episode of the proposer's attempt, each diffed against the one before."""
    messages = transcript.messages
    first_user = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first_user is None:
        return []
    out: list[Revision] = []
    files: dict[str, str] = {}
    current: Revision | None = None
    for message in messages[first_user:]:
        role = message.get("role")
        if role == "user":
            if current is not None:
                out.append(current)
            feedback = "" if current is None else str(message.get("content") or "")
            current = Revision(number=len(out), files=dict(files), feedback=feedback)
        elif role == "assistant" and current is not None:
            for path, content in _BLOCK.findall(str(message.get("content") or "")):
                files[path] = content
            for call in message.get("tool_calls") or []:
                if isinstance(call, dict) and not _apply(files, call):
                    # The terminal's `run` may change files in ways no replay can know.
                    current.terminal_calls += (call.get("function") or {}).get("name") == "run"
            current.files = dict(files)
    if current is not None:
        out.append(current)
    previous: dict[str, str] = {}
    for revision in out:
        revision.diffs = _diffs(previous, revision.files)
        previous = revision.files
    return out
