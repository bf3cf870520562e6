"""A chat model whose replies are scripted: for tests and offline demos, never for results.

Replies come from a JSON file (`scripted:/path/script.json`, usable across processes such as a
`langgraph dev` server) or from a Python responder registered in-process (`scripted:<name>`), which
sees the conversation so far and may react to it (e.g. read the gate's rejection and fix the bug).
Everything the replies' tool calls then do is real.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

Responder = Callable[[Sequence[BaseMessage]], AIMessage | str]

_REGISTRY: dict[str, Responder | list[AIMessage | str]] = {}
_lock = threading.Lock()


def register(name: str, script: Responder | Sequence[AIMessage | str]) -> str:
    """Register a responder or a list of replies; returns the model string to configure."""
    with _lock:
        _REGISTRY[name] = script if callable(script) else list(script)
    return f"scripted:{name}"


def tool_call(name: str, **args: Any) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}


def reply(content: str = "", *calls: dict[str, Any]) -> AIMessage:
    return AIMessage(content=content, tool_calls=list(calls))


def _from_json(item: dict[str, Any] | str) -> AIMessage:
    if isinstance(item, str):
        return AIMessage(content=item)
    calls = [tool_call(c["name"], **c.get("args", {})) for c in item.get("tool_calls", [])]
    return AIMessage(content=item.get("content", ""), tool_calls=calls)


class ScriptedChatModel(BaseChatModel):
    """Replays replies in order (or asks a responder); says it is done when the script runs out."""

    name_: str = "scripted"
    _replies: list[AIMessage | str] = PrivateAttr(default_factory=list)
    _responder: Responder | None = PrivateAttr(default=None)
    _cursor: int = PrivateAttr(default=0)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChatModel:
        return self  # the script already knows which tools it calls

    def _next(self, messages: Sequence[BaseMessage]) -> AIMessage:
        if self._responder is not None:
            out = self._responder(messages)
        elif self._cursor < len(self._replies):
            out = self._replies[self._cursor]
            self._cursor += 1
        else:
            out = "I am done."
        message = AIMessage(content=out) if isinstance(out, str) else out.model_copy()
        # Token counts are estimates (4 characters a token) so budgets and reports work.
        prompt = sum(len(str(m.content)) for m in messages) // 4 + 1
        completion = (len(str(message.content)) + len(json.dumps(message.tool_calls))) // 4 + 1
        message.usage_metadata = {
            "input_tokens": prompt,
            "output_tokens": completion,
            "total_tokens": prompt + completion,
        }
        return message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next(messages))])


def load_scripted(spec: str) -> ScriptedChatModel:
    """`name` (registered in this process) or a JSON file path."""
    model = ScriptedChatModel(name_=spec)
    if spec in _REGISTRY:
        script = _REGISTRY[spec]
        if callable(script):
            model._responder = script
        else:
            model._replies = list(script)
        return model
    path = Path(spec)
    if not path.exists():
        raise ValueError(f"scripted model {spec!r}: no registered script and no such JSON file")
    data = json.loads(path.read_text())
    model._replies = [
        _from_json(item) for item in data.get("replies", data if isinstance(data, list) else [])
    ]
    return model
