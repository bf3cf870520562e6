"""`autoenvscaling view RUN_DIR`: the read-only web viewer over a run folder (viewer/)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

view_app = typer.Typer()


@view_app.command()
def view(
    run_dir: Annotated[
        Path, typer.Argument(help="The run folder (RUN_DIR of `autoenvscaling run`).")
    ],
    port: Annotated[int, typer.Option("--port", "-p", help="Port to serve on.")] = 8765,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to bind. The default serves this machine only; the run's files "
            "(prompts, outputs, paths) are shown to whoever can reach the port.",
        ),
    ] = "127.0.0.1",
    harbor_url: Annotated[
        str | None,
        typer.Option(
            "--harbor-url",
            help="A running `harbor view RUN_DIR --jobs` (e.g. http://127.0.0.1:8080): trial "
            "pages link into it.",
        ),
    ] = None,
    refresh_ms: Annotated[
        int, typer.Option("--refresh-ms", help="How often live parts of a page refresh.")
    ] = 2000,
) -> None:
    """Serve a web viewer over RUN_DIR, live while the run writes: overview, curves,
    candidates and verdicts, rollouts as conversations, trials. Read-only."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    import uvicorn

    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..viewer.app import create_app

    if not run_dir.is_dir():
        raise typer.BadParameter(f"{run_dir} is not a folder", param_hint="RUN_DIR")
    hosts = ["127.0.0.1", "localhost", "[::1]"]
    if host not in ("127.0.0.1", "localhost", "::1"):
        hosts = ["*"]  # bound to other addresses on purpose: the host names are the user's
    app = create_app(run_dir, harbor_url=harbor_url, refresh_ms=refresh_ms, allowed_hosts=hosts)
    typer.echo(f"viewing {run_dir.resolve()} at http://{host}:{port}/ (Ctrl-C stops)", err=True)
    uvicorn.run(app, host=host, port=port, log_level="warning")
