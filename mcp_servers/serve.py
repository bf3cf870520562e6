"""Run one of the project's MCP servers standalone, over stdio or streamable HTTP."""

from __future__ import annotations

import logging
from typing import Any, Literal

from mcp.server.fastmcp import FastMCP
from mcp.server.transport_security import TransportSecuritySettings

ServerName = Literal["terminal", "filesystem", "rollouts"]
Transport = Literal["stdio", "http"]
LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEFAULT_PORTS: dict[str, int] = {"terminal": 8765, "filesystem": 8766, "rollouts": 8767}

log = logging.getLogger(__name__)


def build_server(name: ServerName, **options: Any) -> FastMCP:
    """`build_<name>_server(**options)`, imported lazily so one server's deps never load another's."""
    if name == "terminal":
        # lazy: one server's deps never load another's
        from .terminal import build_terminal_server

        return build_terminal_server(**options)
    if name == "filesystem":
        # lazy: one server's deps never load another's
        from .filesystem import build_filesystem_server

        return build_filesystem_server(**options)
    if name == "rollouts":
        # lazy: one server's deps never load another's
        from .rollouts import build_rollouts_server

        return build_rollouts_server(**options)
    raise ValueError(f"unknown MCP server {name!r}: choose terminal, filesystem or rollouts")


def serve(
    name: ServerName | FastMCP,
    transport: Transport = "stdio",
    host: str = "127.0.0.1",
    port: int | None = None,
    **options: Any,
) -> None:
    """Build the server `name` with `options` (or take a built one) and serve it until stopped.

    HTTP serves the streamable-HTTP endpoint at http://HOST:PORT/mcp. It binds to loopback by
    default; any other host turns off the DNS-rebinding check, so put it behind your own auth.
    """
    server = name if isinstance(name, FastMCP) else build_server(name, **options)
    if transport == "stdio":
        server.run("stdio")
        return
    if transport != "http":
        raise ValueError(f"unknown transport {transport!r}: choose stdio or http")
    server.settings.host = host
    server.settings.port = port or DEFAULT_PORTS.get(server.name, 8000)
    if host not in LOOPBACK:
        log.warning(
            "serving %s on %s: reachable from other machines, no authentication", server.name, host
        )
        server.settings.transport_security = TransportSecuritySettings(
            enable_dns_rebinding_protection=False
        )
    server.run("streamable-http")
