"""MCP servers: thin faces over `autoenvscaling.tools`."""

from .mcp_adapter import install as _install_schema_cache

_install_schema_cache()  # mcp 1.x rebuilds a JSON-Schema validator per call without it
