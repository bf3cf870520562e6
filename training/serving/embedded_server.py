"""The embedded policy server: a local llama.cpp OpenAI-compatible server that both roles use.

`EmbeddedLlamaServer` starts `embedded_serve` (llama-cpp-python's app + vLLM's LoRA routes) as a
subprocess on 127.0.0.1, on a port this process binds and hands over (no race for a free port),
waits until it answers, and stops it on `stop()`, on leaving its `with` block, at interpreter exit,
and — because the server polls its parent pid — when this process is killed outright.

It is a `PolicyServer`: `activate(checkpoint)` converts the checkpoint to GGUF (a subprocess with
the `train` extra's torch), hot-loads it with `POST /v1/load_lora_adapter` (a full model through
`/v1/load_model`), and returns the `PolicyRef` whose `model` both roles then pass as `model=`.
Clients are the usual OpenAI-compatible ones, e.g.
`init_chat_model("openai:policy", base_url=ref.base_url, api_key="none")`; send
`tool_choice="auto"` with bound tools so the chat format's grammar yields parseable tool calls.
One model is resident at a time: requests alternating between two names reload (~0.5 s each),
which is cheap because after a swap both roles name the same checkpoint.

Supervised: the process runs with Python's faulthandler on (a segfault in llama.cpp leaves its
traceback in server.log), and a watcher thread blocked on its exit sees a crash the moment it
happens. The crash is recorded by URL (training/serving/supervision.py: a model call in flight
then ends as an infrastructure failure naming it, instead of retrying into a dead port) and the
server is started again once, on the same port — this process keeps the listening socket, so
connections made meanwhile wait in its backlog for the new process (seconds) rather than fail —
serving the adapters and models it had loaded, under the same names. The next crash is final:
the socket is closed (calls are refused at once) and `on_down` callbacks stop the run.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Self

import httpx
from pydantic import BaseModel, Field

from ..policy import Checkpoint, PolicyRef, PolicySwapError
from . import supervision
from .embedded_serve import Preload, ServeConfig
from .embedded_setup import (
    embedded_cache_dir,
    ensure_embedded_assets,
    llama_cpp_available,
)
from .gguf_convert import (
    GGUFConversionError,
    convert_full_model,
    convert_lora_adapter,
    export_base_config,
)
from .supervision import (
    PolicyServerCrashed,
    ServerCrash,
    log_tail,
)

SERVE_MODULE = "autoenvscaling.training.serving.embedded_serve"


class EmbeddedServerError(RuntimeError):
    """The embedded server could not be started or did not answer; the message has its log tail."""


class EmbeddedServerConfig(BaseModel):
    """How to run the embedded policy server. Every field has a working default."""

    model_path: Path | None = Field(
        default=None, description="Base GGUF model; default: SmolLM2-135M-Instruct from set-up."
    )
    served_name: str = Field(default="policy", description="`model=` name of the base model.")
    chat_template: str | None = Field(
        default=None,
        description="Jinja chat template to serve; default: the policy's tool template "
        "(training/chat_format.py), the one the trainer tokenizes with.",
    )
    n_ctx: int = Field(
        default=8192, ge=512, description="Context tokens (SmolLM2 was trained on 8192)."
    )
    n_threads: int | None = Field(
        default=None, ge=1, description="Decode threads; default: llama-cpp-python's."
    )
    prompt_cache_mb: int = Field(
        default=0,
        ge=0,
        description="RAM cache of evaluated prompts, MB (0 = off, the default: see ServeConfig).",
    )
    ready_timeout_sec: float = Field(default=120.0, gt=0)
    max_restarts: int = Field(
        default=1,
        ge=0,
        description="Times a crashed server is started again; the crash after that is final.",
    )
    request_timeout_sec: float = Field(
        default=300.0, gt=0, description="Admin calls (adapter loads)."
    )
    work_dir: Path | None = Field(
        default=None,
        description="Config, server log and converted adapters; default: a temp folder removed on stop.",
    )
    cache_dir: Path | None = Field(
        default=None, description="Set-up cache; default: the settings'."
    )
    converter_dir: Path | None = Field(
        default=None, description="llama.cpp converters; default: fetched by set-up on first use."
    )
    base_config_dir: Path | None = Field(
        default=None,
        description="HF config of the base model for LoRA conversion; default: exported from the GGUF.",
    )
    python: str = Field(
        default_factory=lambda: sys.executable,
        description="Interpreter for the server (needs the `embedded` extra).",
    )
    convert_python: str = Field(
        default_factory=lambda: sys.executable,
        description="Interpreter for conversions (needs the `train` extra).",
    )


class EmbeddedLlamaServer:
    """A `PolicyServer` that owns a local llama.cpp server process, and supervises it."""

    def __init__(self, config: EmbeddedServerConfig | None = None, **overrides: Any) -> None:
        self.config = (config or EmbeddedServerConfig()).model_copy(update=overrides)
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None  # the listening socket, held for restarts
        self._port: int | None = None
        self._work_dir: Path | None = None
        self._owns_work_dir = False
        self._model_path: Path | None = None
        self._current: PolicyRef | None = None
        self._loaded: dict[str, Preload] = {}  # what a restart serves again, by name
        self._lock = threading.RLock()
        self._stopping = False
        self._up = threading.Event()  # set while a started process answers
        self.crashes: list[ServerCrash] = []
        self.down: ServerCrash | None = None  # set when it crashed and is not started again
        self._on_down: list[Callable[[ServerCrash], None]] = []
        self._on_crash: list[Callable[[ServerCrash], None]] = []

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def base_url(self) -> str:
        if self._port is None:
            raise EmbeddedServerError("the embedded server is not started; call start() first")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def log_path(self) -> Path | None:
        return self._work_dir / "server.log" if self._work_dir else None

    def on_down(self, callback: Callable[[ServerCrash], None]) -> None:
        """Call `callback` (from the watcher thread) when the server crashed for good."""
        self._on_down.append(callback)

    def on_crash(self, callback: Callable[[ServerCrash], None]) -> None:
        """Call `callback` (from the watcher thread) the moment the process crashes, each time."""
        self._on_crash.append(callback)

    def start(self) -> PolicyRef:
        """Start the server and wait until it answers; returns the base model's ref.

        From then on a watcher thread waits on the process: an exit nobody asked for is a crash,
        recorded (training/serving/supervision.py) the moment it happens. The first crash starts
        the server again, on the same port (this process keeps the listening socket: clients
        holding the URL keep working, and connections made meanwhile wait in its backlog) with
        the adapters and models it served, under the same names; the next one is final."""
        if self.running:
            return self.current()
        if not llama_cpp_available():
            raise EmbeddedServerError(
                "llama-cpp-python with its server extra is not installed: install the `embedded` "
                "extra (pip install 'autoenvscaling[embedded]'; it compiles llama.cpp, ~6 min)"
            )
        cfg = self.config
        self._model_path = (
            cfg.model_path or ensure_embedded_assets(cfg.cache_dir, with_converter=False).model_path
        )
        if not self._model_path.is_file():
            raise EmbeddedServerError(
                f"model file {self._model_path} not found; leave model_path "
                "unset to use the set-up's SmolLM2-135M-Instruct"
            )
        self._work_dir = cfg.work_dir or Path(tempfile.mkdtemp(prefix="autoenvscaling-llama-"))
        self._owns_work_dir = cfg.work_dir is None
        self._work_dir.mkdir(parents=True, exist_ok=True)
        self._stopping, self.down, self.crashes, self._loaded = False, None, [], {}
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._port = self._sock.getsockname()[1]
        supervision.register(self.base_url)
        atexit.register(self.stop)
        try:
            with self._lock:
                self._proc = proc = self._spawn()
            self._wait_ready(proc)
        except BaseException:
            self.stop()
            raise
        self._watch(proc)
        self._current = PolicyRef(
            model=cfg.served_name,
            base_url=self.base_url,
            checkpoint_id=None,
            served_from="llama.cpp:base",
        )
        return self._current

    def _spawn(self) -> subprocess.Popen[bytes]:
        """Start a server process on the held socket, serving what `_loaded` names."""
        cfg = self.config
        assert self._work_dir is not None and self._sock is not None and self._model_path
        current = self._current.model if self._current else None
        serve = ServeConfig(
            model_path=self._model_path,
            served_name=cfg.served_name,
            chat_template=cfg.chat_template,
            n_ctx=cfg.n_ctx,
            n_threads=cfg.n_threads,
            prompt_cache_mb=cfg.prompt_cache_mb,
            listen_fd=self._sock.fileno(),
            port=self._port or 0,
            parent_pid=os.getpid(),
            orphan_cleanup=self._work_dir if self._owns_work_dir else None,
            preload=list(self._loaded.values()),
            serving=current if current in self._loaded else None,
        )
        config_file = self._work_dir / "serve.json"
        config_file.write_text(serve.model_dump_json(indent=2), encoding="utf-8")
        # faulthandler: a crash in native code (llama.cpp) leaves its Python traceback in the log.
        env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
        with open(self._work_dir / "server.log", "ab") as log:
            return subprocess.Popen(
                [cfg.python, "-X", "faulthandler", "-m", SERVE_MODULE, str(config_file)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                pass_fds=[self._sock.fileno()],
                env=env,
            )

    def _watch(self, proc: subprocess.Popen[bytes]) -> None:
        self._up.set()
        threading.Thread(
            target=self._supervise, args=(proc,), name=f"policy-server-{proc.pid}", daemon=True
        ).start()

    def _supervise(self, proc: subprocess.Popen[bytes]) -> None:
        """The watcher thread: wakes when `proc` exits; a crash unless `stop()` asked for it."""
        proc.wait()
        seen = time.monotonic()
        with self._lock:
            if self._stopping or proc is not self._proc:
                return
            self._up.clear()
            restarting = len(self.crashes) < self.config.max_restarts
            crash = ServerCrash(
                base_url=self.base_url,
                pid=proc.pid,
                returncode=proc.returncode,
                log_path=self.log_path,
                log_tail=log_tail(self.log_path),
                at=seen,
                crash_number=len(self.crashes) + 1,
                restarting=restarting,
            )
            self.crashes.append(crash)
            supervision.record_crash(crash, down=not restarting)
            self._note(f"the server (pid {proc.pid}) {crash.how}")
            try:
                new = self._spawn() if restarting else None
            except OSError as exc:
                self._note(f"it could not be started again: {exc}")
                new, crash = None, crash.model_copy(update={"restarting": False})
            self._proc = new
        for callback in list(self._on_crash):
            callback(crash)
        if new is not None:
            try:
                self._wait_ready(new)
            except (EmbeddedServerError, OSError) as exc:
                if new.poll() is not None:
                    # The restarted process died (it may have answered already: a client can be
                    # served before this poll sees it ready): that is a crash of its own, counted
                    # as the next one, with its own signal and log lines.
                    self._supervise(new)
                    return
                self._note(f"it could not be started again: {exc}")
                crash = crash.model_copy(
                    update={"restarting": False, "log_tail": log_tail(self.log_path)}
                )
            else:
                self._note(f"started again (pid {new.pid}) on the same port after the crash")
                self._watch(new)
                return
        self._go_down(crash)

    def _go_down(self, crash: ServerCrash) -> None:
        """Crashed for good: no connection waits on the port any more; the run is told."""
        with self._lock:
            if self._stopping:
                return
            self.down = crash
            supervision.mark_down(crash.base_url)
            if self._proc is not None and self._proc.poll() is None:
                self._proc.kill()
            sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # queued and new connections are refused at once
        for callback in list(self._on_down):
            callback(crash)

    def _note(self, line: str) -> None:
        """A line of our own in the server log, so its reader sees the crash and the restart."""
        if self.log_path is None:
            return
        with contextlib.suppress(OSError), open(self.log_path, "a", encoding="utf-8") as log:
            log.write(f"--- autoenvscaling {time.strftime('%H:%M:%S')}: {line} ---\n")

    def wait_up(self, timeout_sec: float | None = None) -> None:
        """Return once the server answers (at once unless it is being started again); raise
        PolicyServerCrashed when it crashed for good."""
        deadline = time.monotonic() + (timeout_sec or self.config.ready_timeout_sec + 10)
        while not self._up.wait(0.2):
            if self.down is not None:
                raise PolicyServerCrashed(self.down)
            if self._stopping or (self._proc is None and not self.crashes):
                raise EmbeddedServerError(
                    "the embedded server is not running (stopped or never started)"
                )
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"the embedded server did not come back within {timeout_sec}s"
                )

    def stop(self, timeout_sec: float = 10.0) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove the temp work folder; idempotent."""
        with self._lock:
            self._stopping = True
            self._up.clear()
            proc, self._proc = self._proc, None
            sock, self._sock = self._sock, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_sec)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if sock is not None:
            sock.close()
        if self._port is not None:
            supervision.unregister(self.base_url)
        atexit.unregister(self.stop)
        if self._owns_work_dir and self._work_dir is not None:
            shutil.rmtree(self._work_dir, ignore_errors=True)
            self._work_dir = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await asyncio.to_thread(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)

    def _log_tail(self, chars: int = 3000) -> str:
        return log_tail(self.log_path, max_chars=chars)

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + self.config.ready_timeout_sec
        last = "no answer yet"
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise EmbeddedServerError(
                        f"the embedded server exited ({ServerCrash.exit_text(proc.returncode)}) "
                        f"before it was ready; log {self.log_path}:\n{self._log_tail()}"
                    )
                try:
                    response = client.get(f"{self.base_url}/models")
                    if response.status_code == 200:
                        return
                    last = f"GET /v1/models answered {response.status_code}"
                except httpx.HTTPError as exc:
                    last = f"{type(exc).__name__}: {exc}"
                time.sleep(0.2)
        raise EmbeddedServerError(
            f"the embedded server did not answer within "
            f"{self.config.ready_timeout_sec:.0f}s ({last}); log {self.log_path}:\n"
            f"{self._log_tail()}"
        )

    # -- PolicyServer ----------------------------------------------------------------------

    def current(self) -> PolicyRef:
        if self._current is None:
            raise EmbeddedServerError("the embedded server is not started; call start() first")
        return self._current

    async def served_models(self) -> list[str]:
        async with httpx.AsyncClient(timeout=self.config.request_timeout_sec) as client:
            response = await client.get(f"{self.base_url}/models")
        response.raise_for_status()
        return [m["id"] for m in response.json().get("data", [])]

    async def activate(self, checkpoint: Checkpoint) -> PolicyRef:
        """Convert `checkpoint` to GGUF, hot-load it under its id, and make it the current policy."""
        try:  # a server being started again after a crash is waited for (seconds)
            await asyncio.to_thread(self.wait_up)
        except (EmbeddedServerError, PolicyServerCrashed) as exc:
            raise PolicySwapError(f"cannot serve {checkpoint.id!r}: {exc}") from exc
        previous = self.current().model
        try:
            if checkpoint.kind == "lora":
                gguf = await asyncio.to_thread(self.convert_adapter, checkpoint)
                await self.load_lora_adapter(checkpoint.id, gguf)
                served_from = "llama.cpp:lora"
            else:
                gguf = await asyncio.to_thread(self.convert_model, checkpoint)
                await self._post(
                    "/load_model", {"model_name": checkpoint.id, "model_path": str(gguf)}
                )
                self._loaded[checkpoint.id] = Preload(name=checkpoint.id, kind="model", path=gguf)
                served_from = "llama.cpp:full"
            models = await self.served_models()
        except (GGUFConversionError, EmbeddedServerError, httpx.HTTPError) as exc:
            raise PolicySwapError(
                f"could not serve checkpoint {checkpoint.id!r} "
                f"({checkpoint.kind}); still serving {previous!r}: {exc}"
            ) from exc
        if checkpoint.id not in models:
            raise PolicySwapError(
                f"{checkpoint.id!r} reported loaded but /v1/models lists {models}; "
                f"still serving {previous!r}"
            )
        self._current = PolicyRef(
            model=checkpoint.id,
            base_url=self.base_url,
            checkpoint_id=checkpoint.id,
            served_from=served_from,
        )
        return self._current

    async def load_lora_adapter(self, lora_name: str, lora_path: Path) -> None:
        """vLLM's contract: afterwards `model=lora_name` is the base model plus this GGUF adapter."""
        await self._post(
            "/load_lora_adapter", {"lora_name": lora_name, "lora_path": str(lora_path)}
        )
        self._loaded[lora_name] = Preload(name=lora_name, kind="lora", path=lora_path)

    async def _post(self, route: str, body: dict[str, str]) -> None:
        async with httpx.AsyncClient(timeout=self.config.request_timeout_sec) as client:
            response = await client.post(f"{self.base_url}{route}", json=body)
        if response.status_code == 200:
            return
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:1000]
        if response.status_code == 400 and "already been loaded" in message:
            return  # the same id was loaded before (e.g. a retried swap): it is served
        raise EmbeddedServerError(f"POST {route} answered {response.status_code}: {message}")

    # -- conversion ------------------------------------------------------------------------

    def _converted_dir(self) -> Path:
        if self._work_dir is None:
            raise EmbeddedServerError("the embedded server is not started; call start() first")
        return self._work_dir / "converted"

    def _converter_dir(self) -> Path:
        if self.config.converter_dir is None:
            assets = ensure_embedded_assets(self.config.cache_dir, with_converter=True)
            self.config = self.config.model_copy(update={"converter_dir": assets.converter_dir})
        assert self.config.converter_dir is not None
        return self.config.converter_dir

    def _base_config_dir(self, checkpoint: Checkpoint) -> Path:
        """The base model's HF config: the checkpoint's base if it is a folder, else from the GGUF."""
        if self.config.base_config_dir is not None:
            return self.config.base_config_dir
        named = Path(checkpoint.base_model)
        if (named / "config.json").is_file():
            return named
        assert self._model_path is not None
        out = embedded_cache_dir(self.config.cache_dir) / "models" / f"{self._model_path.stem}-hf"
        return export_base_config(self._model_path, out, python=self.config.convert_python)

    def convert_adapter(self, checkpoint: Checkpoint) -> Path:
        """The checkpoint's PEFT adapter as a GGUF adapter file (converted once, then reused)."""
        out = self._converted_dir() / f"{checkpoint.id}.lora.gguf"
        if not out.is_file():
            convert_lora_adapter(
                Path(checkpoint.path),
                out,
                base_config_dir=self._base_config_dir(checkpoint),
                converter_dir=self._converter_dir(),
                python=self.config.convert_python,
            )
        return out

    def convert_model(self, checkpoint: Checkpoint) -> Path:
        """The checkpoint's full HF model as a q8_0 GGUF with the base model's tokenizer.

        Converted once, then reused. Both roles keep the base's vocabulary and chat template.
        """
        out = self._converted_dir() / f"{checkpoint.id}.q8_0.gguf"
        if not out.is_file():
            convert_full_model(
                Path(checkpoint.path),
                out,
                converter_dir=self._converter_dir(),
                vocab_from=self._model_path,
                python=self.config.convert_python,
            )
        return out
