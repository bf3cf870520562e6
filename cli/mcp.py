"""`autoenvscaling mcp terminal|filesystem|rollouts`: run one MCP server standalone."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ..mcp_servers.serve import ServerName

mcp_app = typer.Typer(
    help="Run an MCP server over stdio (default) or streamable HTTP (--transport http).",
    no_args_is_help=True,
)

TransportOpt = Annotated[
    str, typer.Option("--transport", "-t", help="stdio | http (streamable HTTP at /mcp)")
]
HostOpt = Annotated[str, typer.Option("--host", help="HTTP bind address.")]
PortOpt = Annotated[
    int | None, typer.Option("--port", "-p", help="HTTP port (default per server).")
]


def _serve(name: ServerName, transport: str, host: str, port: int | None, **options: Any) -> None:
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..mcp_servers.serve import serve

    # stdout carries the protocol under stdio: logs go to stderr, and only warnings.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        # typer gives str; serve() rejects an unknown transport with ValueError.
        serve(name, transport=transport, host=host, port=port, **options)  # pyright: ignore[reportArgumentType]
    except (ValueError, OSError) as exc:
        raise typer.BadParameter(str(exc)) from exc


@mcp_app.command()
def terminal(
    ref: Annotated[
        str | None,
        typer.Option(
            "--ref",
            envvar="AUTOENVSCALING_SANDBOX_REF",
            help="SandboxRef JSON of a live sandbox to attach to.",
        ),
    ] = None,
    ref_file: Annotated[
        Path | None,
        typer.Option("--ref-file", exists=True, help="File holding the SandboxRef JSON."),
    ] = None,
    cwd: Annotated[
        str | None, typer.Option("--cwd", help="Start directory when attaching.")
    ] = None,
    network: Annotated[
        bool, typer.Option(help="Own workspace only: allow network access.")
    ] = False,
    memory_mb: Annotated[int, typer.Option(help="Own workspace only: memory limit.")] = 2048,
    pids: Annotated[int, typer.Option(help="Own workspace only: process limit.")] = 512,
    workdir: Annotated[
        str, typer.Option(help="Own workspace only: working folder.")
    ] = "/workspace",
    output_cap: Annotated[int, typer.Option(help="Bytes of output returned per call.")] = 16_000,
    desktop: Annotated[
        bool,
        typer.Option(help="Also screenshot, key, type_text, click on the sandbox's X display."),
    ] = False,
    transport: TransportOpt = "stdio",
    host: HostOpt = "127.0.0.1",
    port: PortOpt = None,
) -> None:
    """A persistent bash per MCP session, in the sandbox --ref points at, or in a fresh workspace."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..mcp_servers.terminal import attached_shells, workspace_shells
    from ..tools.sandbox import SandboxLimits, SandboxRef

    text = ref_file.read_text() if ref_file else ref
    if text:
        opener = attached_shells(SandboxRef.model_validate_json(text), cwd=cwd)
    else:
        opener = workspace_shells(
            limits=SandboxLimits(memory_mb=memory_mb, pids=pids), network=network, workdir=workdir
        )
    _serve("terminal", transport, host, port, opener=opener, output_cap=output_cap, desktop=desktop)


@mcp_app.command()
def filesystem(
    root: Annotated[
        Path,
        typer.Option(
            "--root",
            "-r",
            exists=True,
            file_okay=False,
            help="The folder every path is confined to.",
        ),
    ] = Path("."),
    max_file_bytes: Annotated[int, typer.Option(help="Larger files are refused.")] = 10_000_000,
    max_read_bytes: Annotated[int, typer.Option(help="Most bytes one read returns.")] = 64_000,
    max_write_bytes: Annotated[int, typer.Option(help="Largest write or edit result.")] = 2_000_000,
    transport: TransportOpt = "stdio",
    host: HostOpt = "127.0.0.1",
    port: PortOpt = None,
) -> None:
    """Read, write, edit, list, glob and grep inside one folder."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.files.models import FsLimits

    limits = FsLimits(
        max_file_bytes=max_file_bytes,
        max_read_bytes=max_read_bytes,
        max_write_bytes=max_write_bytes,
    )
    _serve("filesystem", transport, host, port, root=root, limits=limits)


@mcp_app.command()
def rollouts(
    db: Annotated[
        str,
        typer.Option(
            "--db",
            envvar="AUTOENVSCALING_ROLLOUT_DB",
            help="The rollout store (SQLite file or postgresql:// URL), opened read-only.",
        ),
    ],
    transport: TransportOpt = "stdio",
    host: HostOpt = "127.0.0.1",
    port: PortOpt = None,
) -> None:
    """Read-only queries over the rollout store: pass rates, failures, trajectories, search."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.rollouts.models import RolloutStoreError
    from ..tools.rollouts.postgres import is_postgres_url
    from ..tools.rollouts.store import RolloutStore

    # A store not written yet is fine: the server opens it on first use.
    if is_postgres_url(db) or Path(db).exists():
        try:
            RolloutStore(db, read_only=True).close()
        except RolloutStoreError as exc:
            raise typer.BadParameter(str(exc), param_hint="--db") from None
    _serve("rollouts", transport, host, port, store=db)
