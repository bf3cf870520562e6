"""The policy servers one run started: processes, not settings and not graph state.

A `PolicyServers` lives exactly as long as the run that opened it (`async with`): the CLI opens
one per `autoenvscaling run`, puts it on the flywheel's runtime context, and every node that swaps
a checkpoint in asks it for the server of the configured kind. A run that nothing started a server
for (the flywheel served by `langgraph dev`, an app passing the default context) gets one the
graph opens itself (graphs/flywheel/roles.py: `serve_embedded_default`) and closes when the run
ends. Two runs in one process (tests, an app embedding the graph) each own theirs; nothing is
registered process-wide but each embedded server's crash record, by URL
(training/serving/supervision.py), which a failed model call reads to learn the server died.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Self, TypeVar

from ..training.serving.embedded_server import EmbeddedLlamaServer
from ..training.serving.supervision import PolicyServerCrashed
from ..training.serving.vllm_server import VLLMPolicyServer

if TYPE_CHECKING:
    from ..training.policy import PolicyRef, PolicyServer
    from ..training.serving.embedded_server import EmbeddedLlamaServer
    from ..training.serving.supervision import ServerCrash
    from .config import RunConfig

T = TypeVar("T")


class PolicyServers:
    """The run's live policy servers, by kind; stopped when the run ends, crash included.

    The embedded server supervises its own process (one restart after a crash); when it is down
    for good, `supervise` stops the run's work with `PolicyServerCrashed` (the CLI's exit 3) and
    `raise_if_down` stops any node that starts afterwards."""

    def __init__(self) -> None:
        self.embedded: EmbeddedLlamaServer | None = None
        self.down: ServerCrash | None = None
        self._down_event: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Told each crash of a server, in words, the moment it happens (the CLI prints it).
        self.notify: Callable[[str], None] | None = None

    async def start_embedded(self, model_path: Path) -> PolicyRef:
        """Start the embedded (llama.cpp) server once; later calls return what it serves."""
        if self.embedded is not None:
            return self.embedded.current()

        server = EmbeddedLlamaServer(model_path=model_path)
        self._loop = asyncio.get_running_loop()
        server.on_down(self._server_down)
        server.on_crash(self._server_crashed)
        ref = await asyncio.to_thread(server.start)
        self.embedded = server
        return ref

    def _server_crashed(self, crash: ServerCrash) -> None:
        if self.notify is not None:
            self.notify(crash.describe())

    def _server_down(self, crash: ServerCrash) -> None:
        """From the server's watcher thread: it crashed and is not started again."""
        self.down = crash
        loop, event = self._loop, self._down_event
        if loop is not None and event is not None and not loop.is_closed():
            loop.call_soon_threadsafe(event.set)

    def raise_if_down(self) -> None:
        if self.down is not None:
            raise PolicyServerCrashed(self.down)

    async def supervise(self, work: Awaitable[T]) -> T:
        """Await `work`; if the policy server goes down for good meanwhile, cancel it and raise
        `PolicyServerCrashed` (the crash's signal and log tail): nothing the run does afterwards
        could reach its model."""

        self._loop = asyncio.get_running_loop()
        self._down_event = event = asyncio.Event()
        if self.down is not None:
            event.set()
        task = asyncio.ensure_future(work)
        watcher = asyncio.ensure_future(event.wait())
        try:
            await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watcher.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
        if self.down is not None and (task.cancelled() or task.exception() is not None):
            raise PolicyServerCrashed(self.down)
        return task.result()

    def for_config(self, config: RunConfig) -> PolicyServer | None:
        """The server that swaps checkpoints for `config.policy_server`, or None (no swaps)."""
        if config.policy_server == "embedded":
            return self.embedded
        if config.policy_server == "vllm" and config.policy_base_url:
            return VLLMPolicyServer(
                base_url=config.policy_base_url, base_model=config.base_model or ""
            )
        return None

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def close(self) -> None:
        """Stop every server (idempotent); `aclose` from async code."""
        server, self.embedded = self.embedded, None
        if server is not None:
            server.stop()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
