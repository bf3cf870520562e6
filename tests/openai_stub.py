"""A scripted OpenAI-compatible endpoint and a fault-injecting proxy in front of it, both real
HTTP servers (FastAPI on uvicorn, in a thread), for tests of how the loop survives a bad endpoint.

Only the replies are scripted (a responder over LangChain messages, as `scripted:` models use);
the client is the real `openai:` chat model with a base_url, speaking HTTP.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any, Self

import httpx
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

Responder = Callable[[Sequence[BaseMessage]], AIMessage | str]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def closed_endpoint() -> str:
    """A base URL where nothing listens: every call is refused."""
    return f"http://127.0.0.1:{_free_port()}/v1"


class _Server:
    def __init__(self, app: FastAPI) -> None:
        self.port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self._server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        )
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "stub server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)


def _completion(reply: AIMessage, prompt_chars: int) -> dict[str, Any]:
    calls = [
        {
            "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
        }
        for call in reply.tool_calls
    ]
    message: dict[str, Any] = {"role": "assistant", "content": str(reply.content) or None}
    if calls:
        message["tool_calls"] = calls
    completion = (len(str(reply.content)) + len(json.dumps(calls))) // 4 + 1
    prompt = prompt_chars // 4 + 1
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": "policy",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        },
    }


class ScriptedEndpoint(_Server):
    """POST /v1/chat/completions answered by `responder` over the request's messages."""

    def __init__(self, responder: Responder) -> None:
        app = FastAPI()
        self.calls = 0
        lock = threading.Lock()

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> JSONResponse:
            body = await request.json()
            messages = convert_to_messages(body["messages"])
            with lock:  # the responder keeps state (e.g. which solver episode this is)
                self.calls += 1
                out = responder(messages)
            reply = AIMessage(content=out) if isinstance(out, str) else out
            return JSONResponse(_completion(reply, len(json.dumps(body["messages"]))))

        super().__init__(app)


class FaultProxy(_Server):
    """Forwards to `upstream`, but answers `rate` of the calls itself with a 500, 503 or 429
    (seeded, so a run is reproducible) without forwarding them."""

    def __init__(self, upstream: str, rate: float, seed: int = 0) -> None:
        app = FastAPI()
        rng = random.Random(seed)
        lock = threading.Lock()
        self.forwarded = 0
        self.injected: list[int] = []

        @app.post("/v1/{path:path}")
        async def forward(path: str, request: Request) -> Response:
            with lock:
                fail = rng.random() < rate
                status = rng.choice((500, 503, 429)) if fail else 200
                if fail:
                    self.injected.append(status)
                else:
                    self.forwarded += 1
            if fail:
                return JSONResponse(
                    {"error": {"message": f"injected fault {status}", "type": "server_error"}},
                    status_code=status,
                )
            async with httpx.AsyncClient(timeout=120) as client:
                upstream_reply = await client.post(
                    f"{upstream}/{path}",
                    content=await request.body(),
                    headers={"content-type": "application/json"},
                )
            return Response(
                upstream_reply.content,
                status_code=upstream_reply.status_code,
                media_type="application/json",
            )

        super().__init__(app)
