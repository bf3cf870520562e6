"""`python -m autoenvscaling.mcp_servers terminal|filesystem|rollouts [options]`."""

from ..cli.mcp import mcp_app

if __name__ == "__main__":
    mcp_app(prog_name="python -m autoenvscaling.mcp_servers")
