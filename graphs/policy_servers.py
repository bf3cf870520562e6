"""The policy servers one run started: processes, not settings and not graph state.

A `PolicyServers` lives exactly as long as the run that opened it (`async with`): the CLI opens
one per `autoenvscaling run`, puts it on the flywheel's runtime context, and every node that swaps
a checkpoint in asks it for the server of the configured kind. A run that nothing started a server
for (the flywheel served by `langgraph dev`, an app passing the default context) gets one the
graph opens itself (graphs/flywheel_roles.py: `serve_embedded_default`) and closes when the run
ends. Two runs in one process (tests, an app embedding the graph) each own theirs; nothing is
registered process-wide.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from autoenvscaling.graphs.config import RunConfig
    from autoenvscaling.training.policy import PolicyRef, PolicyServer
    from autoenvscaling.training.serving.embedded_server import EmbeddedLlamaServer


class PolicyServers:
    """The run's live policy servers, by kind; stopped when the run ends, crash included."""

    def __init__(self) -> None:
        self.embedded: EmbeddedLlamaServer | None = None

    async def start_embedded(self, model_path: Path) -> PolicyRef:
        """Start the embedded (llama.cpp) server once; later calls return what it serves."""
        if self.embedded is not None:
            return self.embedded.current()
        from autoenvscaling.training.serving.embedded_server import EmbeddedLlamaServer

        server = EmbeddedLlamaServer(model_path=model_path)
        ref = await asyncio.to_thread(server.start)
        self.embedded = server
        return ref

    def for_config(self, config: RunConfig) -> PolicyServer | None:
        """The server that swaps checkpoints for `config.policy_server`, or None (no swaps)."""
        if config.policy_server == "embedded":
            return self.embedded
        if config.policy_server == "vllm" and config.policy_base_url:
            from autoenvscaling.training.serving.vllm_server import VLLMPolicyServer

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
