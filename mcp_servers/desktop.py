"""The desktop tools as MCP tools (computer use): screenshot, key, type_text, click.

A thin face over tools/sandbox/desktop.py, which holds the tools (one implementation: a GRPO
episode of a computer-use task calls the same functions): added to the terminal server
(`build_terminal_server(..., desktop=True)`), acting on the session's sandbox as its terminal's
user. A screenshot is an MCP ImageContent (PNG) after the text block that describes it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Literal

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations
from pydantic import Field

from ..tools.agents.solver_interface import DESKTOP_TOOLS
from ..tools.sandbox import desktop
from ..tools.sandbox.base import SandboxError
from ..tools.sandbox.desktop import NO_SANDBOX, DesktopError, DesktopResult, Execs

__all__ = ["NO_SANDBOX", "DesktopError", "add_desktop_tools", "as_mcp"]

SandboxOf = Callable[[Context], Awaitable[Execs]]
"""The sandbox (its exec path) of the MCP session a request belongs to."""


def as_mcp(result: DesktopResult) -> CallToolResult:
    """The text block, then the PNG (a screenshot's) as an ImageContent."""
    content: list[TextContent | ImageContent] = [TextContent(type="text", text=result.text)]
    if result.png is not None:
        content.append(ImageContent(type="image", data=result.png, mimeType="image/png"))
    return CallToolResult(content=list(content), isError=result.is_error)


def add_desktop_tools(server: FastMCP, sandbox_of: SandboxOf) -> None:
    """Register screenshot, key, type_text and click on `server`, acting in `sandbox_of(ctx)`."""

    async def act(
        ctx: Context, tool: Callable[[Execs], Awaitable[DesktopResult]]
    ) -> CallToolResult:
        try:
            return as_mcp(await tool(await sandbox_of(ctx)))
        except DesktopError as exc:
            return as_mcp(desktop.error(str(exc)))
        except SandboxError as exc:
            return as_mcp(desktop.error(f"the sandbox could not run the desktop command: {exc}"))

    @server.tool(
        name="screenshot",
        description=DESKTOP_TOOLS["screenshot"].description,
        annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
        structured_output=False,
    )
    async def screenshot_tool(ctx: Context) -> CallToolResult:
        return await act(ctx, desktop.screenshot)

    @server.tool(
        name="key",
        description=DESKTOP_TOOLS["key"].description,
        annotations=ToolAnnotations(destructiveHint=True, openWorldHint=False),
        structured_output=False,
    )
    async def key_tool(
        keys: Annotated[str, Field(description=_param("key", "keys"))],
        ctx: Context,
    ) -> CallToolResult:
        return await act(ctx, lambda sandbox: desktop.key(sandbox, keys))

    @server.tool(
        name="type_text",
        description=DESKTOP_TOOLS["type_text"].description,
        annotations=ToolAnnotations(destructiveHint=True, openWorldHint=False),
        structured_output=False,
    )
    async def type_text_tool(
        text: Annotated[str, Field(description=_param("type_text", "text"))],
        ctx: Context,
    ) -> CallToolResult:
        return await act(ctx, lambda sandbox: desktop.type_text(sandbox, text))

    @server.tool(
        name="click",
        description=DESKTOP_TOOLS["click"].description,
        annotations=ToolAnnotations(destructiveHint=True, openWorldHint=False),
        structured_output=False,
    )
    async def click_tool(
        x: Annotated[int, Field(description=_param("click", "x"))],
        y: Annotated[int, Field(description=_param("click", "y"))],
        ctx: Context,
        button: Annotated[
            Literal["left", "middle", "right"], Field(description=_param("click", "button"))
        ] = "left",
        double: Annotated[bool, Field(description=_param("click", "double"))] = False,
    ) -> CallToolResult:
        return await act(ctx, lambda sandbox: desktop.click(sandbox, x, y, button, double))


def _param(tool: str, name: str) -> str:
    return next(p.description for p in DESKTOP_TOOLS[tool].params if p.name == name)
