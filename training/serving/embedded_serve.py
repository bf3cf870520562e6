"""The embedded policy server process: llama-cpp-python's OpenAI-compatible app plus vLLM's LoRA routes.

Run by `EmbeddedLlamaServer` as `python -m autoenvscaling.training.serving.embedded_serve CONFIG.json`; never
imported by the graph process. On top of llama-cpp-python's FastAPI app (used as is) it adds:
- `POST /v1/load_lora_adapter {"lora_name", "lora_path"}` and `POST /v1/unload_lora_adapter
  {"lora_name"}` with vLLM's contract: afterwards `model=<lora_name>` is served by base + adapter;
  `lora_path` is a GGUF adapter file, or a folder holding exactly one `.gguf`;
- `POST /v1/load_model {"model_name", "model_path"}`: a further GGUF model (a full checkpoint);
- `GET /health`, as vLLM has;
- unknown `model=` names answer 404 (llama-cpp-python would silently serve the default model, so a
  client naming a checkpoint that is not loaded would get the base model without noticing);
- chats rendered with the policy's chat format (training/chat_format.py: the template the trainer
  tokenizes with, tools, tool calls and tool results included) by a chat handler of our own
  (`ToolChatHandler`), and tool calls parsed the way that template writes them;
- `POST /tokenize {"messages", "tools", "add_generation_prompt"}` -> `{"tokens", "count",
  "max_model_len"}`, vLLM's chat form: the very ids a chat request conditions on (the handler and
  this route share one function), so a test can hold them against the trainer's;
- vLLM's sampling defaults (top_p 1, top_k off, min_p 0, repetition penalty 1) where a request
  names none: llama-cpp-python's own defaults sample from another distribution than the trainer's.
The process exits by itself when its parent dies (it polls its parent pid), so a SIGKILLed run
never leaves a server behind. It serves from the start the adapters and models its config's
`preload` names (a server started again after a crash serves what the crashed one did); its
parent runs it with faulthandler on, so a crash in native code leaves a traceback in its log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..chat_format import tool_chat_template
from ..orphan import watch_parent
from .cpu_support import UnsupportedCpuError, check_cpu_support
from .llama_cpp_adapter import create_app
from .tool_chat import HANDLER_NAME, register

GGUF_MAGIC = b"GGUF"


class Preload(BaseModel):
    """A name the server serves besides its base model: a GGUF LoRA adapter or full model."""

    name: str = Field(min_length=1)
    kind: Literal["lora", "model"]
    path: Path


class ServeConfig(BaseModel):
    """What `EmbeddedLlamaServer` hands the server process (written as JSON)."""

    model_path: Path
    served_name: str = "policy"
    chat_template: str | None = Field(
        default=None,
        description="Jinja chat template to serve; None = the policy's tool template "
        "(training/chat_format.py), the one the trainer tokenizes with.",
    )
    n_ctx: int = 8192
    prompt_cache_mb: int = Field(
        default=0,
        ge=0,
        description="llama-cpp-python's RAM cache of evaluated prompts (0 = off, the default). Off: "
        "its size accounting leaves out the per-token scores each saved state carries (~0.2 MB a "
        "token for this vocabulary), so one proposer conversation took the server from 1.6 to "
        "21 GB RSS and the run's server was OOM-killed; off, the same conversation stays at "
        "1.1-1.6 GB and is served faster (benchmarks/RESULTS.md, #26 third measurement).",
    )
    n_threads: int | None = None
    n_threads_batch: int | None = None
    listen_fd: int | None = Field(default=None, description="An inherited listening TCP socket.")
    host: str = "127.0.0.1"
    port: int = 0
    parent_pid: int | None = Field(default=None, description="Exit when this process is gone.")
    orphan_cleanup: Path | None = Field(
        default=None,
        description="Folder to remove when we exit because the parent died "
        "(the parent removes it itself on a normal stop).",
    )
    verbose: bool = False
    preload: list[Preload] = Field(
        default_factory=list,
        description="Adapters and models to serve from the start, under their names: a server "
        "started again after a crash serves what the crashed one did.",
    )
    serving: str | None = Field(
        default=None, description="The preloaded name to load first (the one in use)."
    )


class LoadLoraRequest(BaseModel):
    lora_name: str = Field(min_length=1)
    lora_path: str = Field(min_length=1)


class UnloadLoraRequest(BaseModel):
    lora_name: str = Field(min_length=1)


class LoadModelRequest(BaseModel):
    model_name: str = Field(min_length=1)
    model_path: str = Field(min_length=1)


class TokenizeChatRequest(BaseModel):
    """vLLM's `/tokenize` request in its chat form."""

    model: str | None = None
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    add_generation_prompt: bool = True


def resolve_gguf(path_text: str) -> Path:
    """A GGUF file given as itself, or as a folder holding exactly one `.gguf`."""
    path = Path(path_text)
    if path.is_dir():
        found = sorted(path.glob("*.gguf"))
        if len(found) != 1:
            raise ValueError(
                f"{path} must hold exactly one .gguf file (found {len(found)}); "
                "convert a PEFT adapter with autoenvscaling.training.serving.gguf_convert"
            )
        path = found[0]
    if not path.is_file():
        raise ValueError(f"{path} does not exist")
    with open(path, "rb") as fh:
        if fh.read(4) != GGUF_MAGIC:
            raise ValueError(
                f"{path} is not a GGUF file; convert a PEFT adapter with "
                "autoenvscaling.training.serving.gguf_convert"
            )
    return path


#: vLLM's (and TRL's) sampling defaults, used where a request names none: llama-cpp-python's own
#: (top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.1) would sample from another distribution
#: than the one the trainer scores.
SAMPLING_DEFAULTS = {"top_p": 1.0, "top_k": 0, "min_p": 0.0, "repeat_penalty": 1.0}


def _openai_request(body: bytes) -> bytes:
    """A chat request as llama-cpp-python's request model takes it: `null` content as "", the
    sampling defaults above filled in, the reply cap under the name it reads."""
    try:
        payload = json.loads(body)
    except ValueError:
        return body
    if not isinstance(payload, dict):
        return body
    messages = payload.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict) and message.get("content", "") is None:
            message["content"] = ""
    for key, value in SAMPLING_DEFAULTS.items():
        payload.setdefault(key, value)
    # OpenAI's current name for the reply cap (langchain-openai sends only this one); llama-cpp-
    # python knows only `max_tokens` and would otherwise generate until the context is full.
    if payload.get("max_completion_tokens") is not None and payload.get("max_tokens") is None:
        payload["max_tokens"] = payload["max_completion_tokens"]
    return json.dumps(payload).encode()


class OpenAIRequestMiddleware:
    """OpenAI clients send `content: null` on assistant turns that only call tools; OpenAI and
    vLLM accept it, llama-cpp-python's request model wants a string. Normalised here, with the
    sampling defaults (plain ASGI, so the body is read once and replayed)."""

    def __init__(self, app) -> None:  # noqa: ANN001 - an ASGI app
        self.app = app

    async def __call__(self, scope, receive, send) -> None:  # noqa: ANN001
        if not (
            scope["type"] == "http"
            and scope["method"] == "POST"
            and scope["path"].endswith("/chat/completions")
        ):
            await self.app(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = _openai_request(b"".join(chunks))
        replayed = False

        async def replay():  # noqa: ANN202
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def build_app(config: ServeConfig):  # -> fastapi.FastAPI (imported lazily: heavy)
    import llama_cpp.server.app as llama_app
    from fastapi import Depends, HTTPException
    from fastapi.responses import JSONResponse, PlainTextResponse
    from llama_cpp.server.model import LlamaProxy
    from llama_cpp.server.settings import ModelSettings, ServerSettings

    def error(status: int, message: str, kind: str) -> JSONResponse:
        # vLLM's error body shape, which clients (and VLLMPolicyServer) read
        return JSONResponse(
            {"error": {"message": message, "type": kind, "code": status}}, status_code=status
        )

    class StrictLlamaProxy(LlamaProxy):
        """LlamaProxy that refuses unknown model names instead of serving the default one, and
        loads and unloads models by name. Keeps its own table of what it serves and reaches the
        parent only through its public methods (`proxy[name] = settings`, `proxy(name)`)."""

        def __init__(self, models: list[ModelSettings]) -> None:
            super().__init__(models=models)
            self.base_name = str(models[0].model_alias)
            self.served = {str(m.model_alias): m for m in models}
            self.current_name = self.base_name
            built.append(self)

        def __iter__(self):  # noqa: ANN204 - the names served (/v1/models lists them)
            yield from list(self.served)  # a generator, as LlamaProxy's own

        def __contains__(self, name: object) -> bool:
            return name in self.served

        def __call__(self, model: str | None = None):
            if model is not None and model not in self.served:
                raise HTTPException(
                    404, f"The model `{model}` does not exist. Served: {sorted(self.served)}"
                )
            llama = super().__call__(model)
            self.current_name = model or self.base_name
            return llama

        def register(self, name: str, settings: ModelSettings) -> None:
            """Serve `name`, loaded on its first request."""
            self[name] = settings
            self.served[name] = settings

        def add(self, name: str, settings: ModelSettings) -> None:
            """Register `name` and load it now, so a bad file fails here and not on a request."""
            self.register(name, settings)
            try:
                self(name)
            except BaseException:
                del self.served[name]
                raise

        def remove(self, name: str) -> None:
            if name == self.base_name:
                raise ValueError(f"the base model {name!r} cannot be unloaded")
            del self.served[name]
            if self.current_name == name:
                self(self.base_name)

    handler = register(config.chat_template or tool_chat_template())
    threads: dict[str, int] = {}  # unset: llama-cpp-python's own defaults
    if config.n_threads:
        threads["n_threads"] = config.n_threads
    if config.n_threads_batch:
        threads["n_threads_batch"] = config.n_threads_batch
    base = ModelSettings.model_validate(
        {
            "model": str(config.model_path),
            "model_alias": config.served_name,
            "chat_format": HANDLER_NAME,
            "n_ctx": config.n_ctx,
            "verbose": config.verbose,
            "cache": config.prompt_cache_mb > 0,
            "cache_type": "ram",
            "cache_size": max(config.prompt_cache_mb, 1) << 20,
            **threads,
        }
    )

    def lora_settings(name: str, path: str) -> ModelSettings:
        return base.model_copy(update={"model_alias": name, "lora_path": str(resolve_gguf(path))})

    def model_settings(name: str, path: str) -> ModelSettings:
        return base.model_copy(update={"model_alias": name, "model": str(resolve_gguf(path))})

    # Two clients (proposer and solver) may stream at once: do not cut one off for the other.
    server = ServerSettings(host=config.host, port=config.port, interrupt_requests=False)
    built: list[StrictLlamaProxy] = []  # the proxy create_app makes (it keeps it to itself)
    app = create_app(StrictLlamaProxy, server, [base])
    proxy_instance = built[-1]
    for item in config.preload:  # before the first request is accepted: no name is missing
        make = lora_settings if item.kind == "lora" else model_settings
        proxy_instance.register(item.name, make(item.name, str(item.path)))
    if config.serving is not None:
        proxy_instance(config.serving)  # loaded now: a bad file fails the start, not a request
    proxy_dependency = Depends(llama_app.get_llama_proxy)  # holds the server's model lock

    @app.exception_handler(HTTPException)
    async def http_error(_request, exc: HTTPException) -> JSONResponse:
        kind = "NotFoundError" if exc.status_code == 404 else "HTTPError"
        return error(exc.status_code, str(exc.detail), kind)

    app.add_middleware(OpenAIRequestMiddleware)

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/tokenize")
    async def tokenize(body: TokenizeChatRequest, proxy=proxy_dependency):
        try:
            llama = proxy(body.model)
            ids = handler.prompt_ids(
                llama, body.messages, body.tools, add_generation_prompt=body.add_generation_prompt
            )
        except HTTPException:
            raise
        except Exception as exc:  # noqa: BLE001 - a template error is the request's 400
            return error(400, f"cannot render the chat: {exc}", "InvalidUserInput")
        return {"tokens": ids, "count": len(ids), "max_model_len": config.n_ctx}

    @app.post("/v1/load_lora_adapter")
    async def load_lora_adapter(body: LoadLoraRequest, proxy=proxy_dependency):
        if body.lora_name in proxy:
            return error(
                400,
                f"The lora adapter '{body.lora_name}' has already been loaded.",
                "InvalidUserInput",
            )
        try:
            proxy.add(body.lora_name, lora_settings(body.lora_name, body.lora_path))
        except Exception as exc:  # noqa: BLE001 - any load failure is the caller's bad input
            return error(
                400, f"Failed to load LoRA adapter '{body.lora_name}': {exc}", "InvalidUserInput"
            )
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' added successfully.")

    @app.post("/v1/unload_lora_adapter")
    async def unload_lora_adapter(body: UnloadLoraRequest, proxy=proxy_dependency):
        if body.lora_name not in proxy:
            return error(
                404, f"The lora adapter '{body.lora_name}' cannot be found.", "NotFoundError"
            )
        try:
            proxy.remove(body.lora_name)
        except ValueError as exc:
            return error(400, str(exc), "InvalidUserInput")
        return PlainTextResponse(f"Success: LoRA adapter '{body.lora_name}' removed successfully.")

    @app.post("/v1/load_model")
    async def load_model(body: LoadModelRequest, proxy=proxy_dependency):
        if body.model_name in proxy:
            return error(
                400, f"The model '{body.model_name}' has already been loaded.", "InvalidUserInput"
            )
        try:
            proxy.add(body.model_name, model_settings(body.model_name, body.model_path))
        except Exception as exc:  # noqa: BLE001 - any load failure is the client's 400, as llama.cpp answers
            return error(
                400, f"Failed to load model '{body.model_name}': {exc}", "InvalidUserInput"
            )
        return PlainTextResponse(f"Success: model '{body.model_name}' added successfully.")

    return app


def serve(config: ServeConfig) -> None:
    # lazy: only the server process runs uvicorn (~100 modules); its parent imports this module
    import uvicorn

    server: uvicorn.Server | None = None

    def on_orphan() -> None:
        if config.orphan_cleanup is not None:
            shutil.rmtree(config.orphan_cleanup, ignore_errors=True)
        if server is None:  # still loading the model: nothing to shut down gracefully
            os._exit(0)
        server.should_exit = True

    if config.parent_pid is not None:
        watch_parent(config.parent_pid, on_orphan)
    app = build_app(config)
    server = uvicorn.Server(
        uvicorn.Config(
            app, host=config.host, port=config.port, log_level="warning", access_log=False
        )
    )
    if config.listen_fd is None:
        server.run()
        return
    # The parent bound the port (no race for a free one); we just accept on it.
    with contextlib.closing(socket.socket(fileno=config.listen_fd)) as sock:
        server.run(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        sys.exit("usage: python -m autoenvscaling.training.serving.embedded_serve CONFIG.json")
    config = ServeConfig.model_validate_json(Path(args[0]).read_text(encoding="utf-8"))
    # Before any model is loaded: a build this CPU cannot run (or one host's native build) would
    # segfault in decode on the first request; refused here, its reason is the log's last line,
    # which the parent's "exited before it was ready" error shows.
    try:
        check_cpu_support()
    except UnsupportedCpuError as exc:
        sys.exit(f"embedded server: {exc}")
    serve(config)


if __name__ == "__main__":
    main()
