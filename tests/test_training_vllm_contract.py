"""VLLMPolicyServer against vLLM's HTTP contract, served by a small local stand-in.

This tests OUR client against the contract as vLLM documents and implements it (read from
vLLM's `serve/lora/api_router.py` and `openai/models/serving.py`): `POST /v1/load_lora_adapter`
(only with VLLM_ALLOW_RUNTIME_LORA_UPDATING; 200 with a plain-text success line, 400 for a name
already loaded, 404 with vLLM's error body for a missing adapter), `GET /v1/models` listing base and
adapters, the dev-mode `POST /collective_rpc`, and FastAPI's `{"detail": "Not Found"}` for an absent
route. It is not vLLM itself: a real server is only checked on a GPU machine.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Self

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.policy import Checkpoint, PolicyServer, PolicySwapError
from autoenvscaling.training.serving.vllm_server import VLLMPolicyServer

BASE = "tiny-base"


def _error(message: str, kind: str, code: int) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "param": None, "code": code}}, status_code=code
    )


class FakeVLLM:
    """Implements the routes VLLMPolicyServer relies on, with vLLM's status codes and bodies."""

    def __init__(self, *, runtime_lora: bool, dev_mode: bool) -> None:
        self.base = BASE
        self.loras: dict[str, str] = {}
        self.weights: str | None = None
        self.rpc_calls: list[dict] = []
        self.chat_requests: list[dict] = []  # every chat completion body, in order
        self.app = FastAPI()
        app = self.app

        @app.get("/v1/models")
        async def models() -> dict:
            data = [{"id": self.base, "object": "model", "root": self.base}]
            data += [
                {"id": n, "object": "model", "root": p, "parent": self.base}
                for n, p in self.loras.items()
            ]
            return {"object": "list", "data": data}

        @app.post("/v1/chat/completions")
        async def chat(request: Request) -> Response:
            body = await request.json()
            self.chat_requests.append(body)
            model = body.get("model")
            if model != self.base and model not in self.loras:
                return _error(f"The model `{model}` does not exist.", "NotFoundError", 404)
            served = self.loras.get(model) or self.weights or self.base
            return JSONResponse(
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 0,
                    "model": model,
                    "choices": [
                        {
                            "index": 0,
                            "finish_reason": "stop",
                            "message": {"role": "assistant", "content": f"weights={served}"},
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )

        if runtime_lora:

            @app.post("/v1/load_lora_adapter")
            async def load(request: Request) -> Response:
                body = await request.json()
                name, path = body.get("lora_name"), body.get("lora_path")
                if not name or not path:
                    return _error(
                        "Both 'lora_name' and 'lora_path' must be provided.",
                        "InvalidUserInput",
                        400,
                    )
                if name in self.loras and not body.get("load_inplace"):
                    return _error(
                        f"The lora adapter '{name}' has already been loaded. If you want "
                        "to load the adapter in place, set 'load_inplace' to True.",
                        "InvalidUserInput",
                        400,
                    )
                if not (Path(path) / "adapter_config.json").is_file():
                    return _error(
                        f"Loading lora {name} failed: No adapter found for {path}",
                        "NotFoundError",
                        404,
                    )
                self.loras[name] = path
                return Response(f"Success: LoRA adapter '{name}' added successfully.")

        if dev_mode:

            @app.post("/collective_rpc")
            async def rpc(request: Request) -> Response:
                body = await request.json()
                self.rpc_calls.append(body)
                if body.get("method") != "reload_weights":
                    return JSONResponse({"detail": "unknown method"}, status_code=500)
                self.weights = body["kwargs"]["weights_path"]
                return JSONResponse({"results": [None]})


class Served:
    def __init__(self, fake: FakeVLLM) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        self.fake = fake
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.server = uvicorn.Server(
            uvicorn.Config(fake.app, host="127.0.0.1", port=port, log_level="warning")
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "stand-in server did not start"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(10)


@pytest.fixture
def registry(tmp_path: Path) -> CheckpointRegistry:
    return CheckpointRegistry(tmp_path / "reg")


def _publish(registry: CheckpointRegistry, tmp_path: Path, kind: str, name: str) -> Checkpoint:
    weights = tmp_path / name
    weights.mkdir()
    (weights / ("adapter_config.json" if kind == "lora" else "config.json")).write_text("{}")
    return registry.publish(weights, base_model=BASE, kind=kind)  # type: ignore[arg-type]


def _ask(ref) -> str:
    """What a role's client does: OpenAI-compatible chat with model=ref.model."""
    response = httpx.post(
        f"{ref.base_url}/chat/completions",
        timeout=10,
        json={"model": ref.model, "messages": [{"role": "user", "content": "hi"}]},
    )
    response.raise_for_status()
    return response.json()["choices"][0]["message"]["content"]


async def test_lora_hot_load_then_clients_use_new_name(registry, tmp_path) -> None:
    ckpt = _publish(registry, tmp_path, "lora", "a")
    with Served(FakeVLLM(runtime_lora=True, dev_mode=False)) as srv:
        server = VLLMPolicyServer(srv.base_url, BASE)
        assert isinstance(server, PolicyServer)
        assert server.current().model == BASE and server.current().checkpoint_id is None
        ref = await server.activate(ckpt)
        assert (ref.model, ref.checkpoint_id, ref.served_from) == (ckpt.id, ckpt.id, "vllm:lora")
        assert server.current() == ref
        assert ckpt.id in await server.served_models()
        assert _ask(ref) == f"weights={ckpt.path}"  # proposer and solver would both get this
        # Activating the same checkpoint again (a retried swap) is not an error.
        assert (await server.activate(ckpt)).model == ckpt.id


async def test_lora_route_absent_says_how_to_enable(registry, tmp_path) -> None:
    ckpt = _publish(registry, tmp_path, "lora", "a")
    with Served(FakeVLLM(runtime_lora=False, dev_mode=False)) as srv:
        server = VLLMPolicyServer(srv.base_url, BASE)
        with pytest.raises(PolicySwapError) as err:
            await server.activate(ckpt)
        text = str(err.value)
        assert "VLLM_ALLOW_RUNTIME_LORA_UPDATING" in text and "still serving 'tiny-base'" in text
        assert server.current().model == BASE  # the previous policy stays


async def test_missing_adapter_reports_vllm_message(registry, tmp_path) -> None:
    ckpt = _publish(registry, tmp_path, "lora", "a")
    (ckpt.path / "adapter_config.json").unlink()
    with (
        Served(FakeVLLM(runtime_lora=True, dev_mode=False)) as srv,
        pytest.raises(PolicySwapError, match="No adapter found"),
    ):
        await VLLMPolicyServer(srv.base_url, BASE, allow_weight_reload=False).activate(ckpt)


async def test_full_weights_reload_in_dev_mode(registry, tmp_path) -> None:
    ckpt = _publish(registry, tmp_path, "full", "f")
    with Served(FakeVLLM(runtime_lora=True, dev_mode=True)) as srv:
        ref = await VLLMPolicyServer(srv.base_url, BASE).activate(ckpt)
        assert (ref.model, ref.checkpoint_id, ref.served_from) == (BASE, ckpt.id, "vllm:reload")
        assert srv.fake.rpc_calls == [
            {"method": "reload_weights", "kwargs": {"weights_path": str(ckpt.path)}}
        ]
        assert _ask(ref) == f"weights={ckpt.path}"


async def test_restart_fallback(registry, tmp_path) -> None:
    ckpt = _publish(registry, tmp_path, "full", "f")
    with Served(FakeVLLM(runtime_lora=False, dev_mode=False)) as srv:

        async def restart(checkpoint: Checkpoint) -> str:
            srv.fake.base = f"served-{checkpoint.id}"  # what `vllm serve <path>` would now list
            return srv.fake.base

        ref = await VLLMPolicyServer(srv.base_url, BASE, restart=restart).activate(ckpt)
        assert (ref.model, ref.served_from) == (f"served-{ckpt.id}", "vllm:restart")
        assert _ask(ref) == f"weights=served-{ckpt.id}"


async def test_every_path_failing_lists_each(registry, tmp_path) -> None:
    ckpt = _publish(registry, tmp_path, "full", "f")
    with Served(FakeVLLM(runtime_lora=False, dev_mode=False)) as srv:
        with pytest.raises(PolicySwapError) as err:
            await VLLMPolicyServer(srv.base_url, BASE).activate(ckpt)
        text = str(err.value)
        assert "VLLM_SERVER_DEV_MODE=1" in text and "no restart callback" in text
