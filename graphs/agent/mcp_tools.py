"""Give a LangGraph node MCP servers as LangChain tools over kept-open sessions.

`open_mcp_tools` connects to the graph's own FastMCP servers in memory (the full MCP protocol,
no subprocess). Sessions stay open for the `async with` block, so a terminal keeps its shell
(cwd, env) across tool calls. Enter and leave the block in the same task (anyio task groups require it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager

from langchain_core.tools import BaseTool
from langchain_mcp_adapters.tools import load_mcp_tools
from mcp.server.fastmcp import FastMCP
from mcp.shared.memory import create_connected_server_and_client_session


@asynccontextmanager
async def open_mcp_tools(
    servers: Mapping[str, FastMCP], *, prefix: bool = False
) -> AsyncIterator[list[BaseTool]]:
    """LangChain tools for `servers` (name -> FastMCP), in memory, over kept-open sessions.

    `prefix=True` names tools `<server>_<tool>` (needed when two servers share a tool name).
    Tool errors reach the model as ToolMessage(status="error") instead of raising.
    """
    with _unwrapped_errors():
        async with AsyncExitStack() as stack:
            tools: list[BaseTool] = []
            for name, server in servers.items():
                session = await stack.enter_async_context(
                    create_connected_server_and_client_session(server)
                )
                tools += await load_mcp_tools(session, server_name=name, tool_name_prefix=prefix)
            names = [tool.name for tool in tools]
            if clashes := sorted({n for n in names if names.count(n) > 1}):
                raise ValueError(
                    f"tool names {clashes} appear in several servers: pass prefix=True"
                )
            yield tools


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
