"""Give a LangGraph node MCP servers as LangChain tools over kept-open sessions.

`open_mcp_tools` connects to the graph's own FastMCP servers in memory (the full MCP protocol,
no subprocess). Sessions stay open for the `async with` block, so a terminal keeps its shell
(cwd, env) across tool calls. Enter and leave the block in the same task (anyio task groups require it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from datetime import timedelta

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp import ClientSession
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session

import autoenvscaling.mcp_servers  # noqa: F401 - installs the cached schema validators


@asynccontextmanager
async def open_mcp_sessions(
    servers: Mapping[str, FastMCP], *, read_timeout_sec: float | None = None
) -> AsyncIterator[dict[str, ClientSession]]:
    """One initialized in-memory client session per server, kept open for the block."""
    timeout = timedelta(seconds=read_timeout_sec) if read_timeout_sec else None
    with _unwrapped_errors():
        async with AsyncExitStack() as stack:
            sessions = {
                name: await stack.enter_async_context(
                    create_connected_server_and_client_session(
                        server,
                        read_timeout_seconds=timeout,  # the SDK's own way
                    )
                )
                for name, server in servers.items()
            }
            yield sessions


@asynccontextmanager
async def open_mcp_tools(
    servers: Mapping[str, FastMCP], *, prefix: bool = False, read_timeout_sec: float | None = None
) -> AsyncIterator[list[BaseTool]]:
    """LangChain tools for `servers` (name -> FastMCP), in memory, over kept-open sessions.

    `prefix=True` names tools `<server>_<tool>` (needed when two servers share a tool name).
    Tool errors reach the model as ToolMessage(status="error") instead of raising.
    """
    async with open_mcp_sessions(servers, read_timeout_sec=read_timeout_sec) as sessions:
        tools: list[BaseTool] = []
        for name, session in sessions.items():
            tools += await load_mcp_tools(session, server_name=name, tool_name_prefix=prefix)
        names = [tool.name for tool in tools]
        if not (clashes := sorted({n for n in names if names.count(n) > 1})):
            yield tools
            return
    raise ValueError(f"tool names {clashes} appear in several servers: pass prefix=True")


@contextmanager
def _unwrapped_errors() -> Iterator[None]:
    """The SDK's task groups wrap any error raised in the block (even the caller's own) in
    nested exception groups; re-raise a lone error as itself so callers can catch it."""
    try:
        yield
    except BaseExceptionGroup as group:
        inner: BaseException = group
        while isinstance(inner, BaseExceptionGroup) and len(inner.exceptions) == 1:
            inner = inner.exceptions[0]
        if inner is group:
            raise
        raise inner from None
