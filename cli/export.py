"""`autoenvscaling export pool|rollouts RUN_DIR`: what a run produced, in shapes other tools read.

Mounted into the main app by cli/main.py (`_mount_subapps`) as the `export` group.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.table import Table

from .options import JsonOpt

export_app = typer.Typer(no_args_is_help=True, help="Export a run's pool or rollouts.")
console = Console(stderr=True)

RunDirArg = Annotated[
    Path, typer.Argument(help="A flywheel run folder (holds manifest.json).", exists=True)
]


@export_app.command("pool")
def pool(
    run_dir: RunDirArg,
    out: Annotated[Path | None, typer.Option("--out", "-o", help="Dataset folder")] = None,
    org: Annotated[str, typer.Option(help="Harbor org of the dataset and its tasks")] = (
        "autoenvscaling"
    ),
    name: Annotated[str | None, typer.Option(help="Dataset name (default: the run id)")] = None,
    include_retired: Annotated[
        bool, typer.Option("--include-retired", help="Also export retired tasks")
    ] = False,
    admitted_only: Annotated[
        bool, typer.Option("--admitted-only", help="Only tasks the flywheel admitted (no seeds)")
    ] = False,
    overwrite: Annotated[bool, typer.Option(help="Replace a non-empty --out folder")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write the pool as a Harbor dataset (`harbor run -p OUT`), a validity card per task."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.export import ExportError, export_pool

    target = out or run_dir / "export" / "pool"
    try:
        result = export_pool(
            run_dir,
            target,
            org=org,
            name=name,
            status="all" if include_retired else "active",
            admitted_only=admitted_only,
            overwrite=overwrite,
        )
    except ExportError as exc:
        raise typer.BadParameter(str(exc)) from None
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    table = Table("task", "source", "gated", "oracle", "nop", "calibration", "digest")
    for task in result.tasks:
        card = task.card
        cal = card.calibration.pass_rate if card.calibration else None
        table.add_row(
            task.name,
            card.source,
            "yes" if card.gated else "no",
            "-" if card.oracle_reward is None else f"{card.oracle_reward:g}",
            "-" if card.nop_reward is None else f"{card.nop_reward:g}",
            "-" if cal is None else f"{cal:.2f}",
            task.digest[:19] + "…",
        )
    Console().print(table)
    console.print(f"dataset {result.name} in {result.dataset}: harbor run -p {result.dataset}")


def role_tool_schemas(store: Path | str) -> dict[str, list[dict[str, Any]]]:
    """The OpenAI function schemas of each role's MCP tools, listed by the servers themselves."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..mcp_servers.filesystem import build_filesystem_server
    from ..mcp_servers.rollouts import build_rollouts_server
    from ..mcp_servers.terminal import build_terminal_server
    from ..tools.rollouts.postgres import is_postgres_url

    async def listed(server: Any) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.inputSchema,
                },
            }
            for t in await server.list_tools()
        ]

    async def gather() -> dict[str, list[dict[str, Any]]]:
        # Built, never started: listing tools opens no sandbox and reads no file.
        terminal = await listed(build_terminal_server())
        # Any folder does for listing: the store's, or here for a PostgreSQL store.
        root = Path.cwd() if is_postgres_url(str(store)) else Path(store).parent
        filesystem = await listed(build_filesystem_server(root))
        rollouts = await listed(build_rollouts_server(store))
        return {"solver": terminal, "proposer": terminal + filesystem + rollouts}

    return asyncio.run(gather())


@export_app.command("rollouts")
def rollouts(
    run_dir: RunDirArg,
    fmt: Annotated[str, typer.Option("--format", "-f", help="atif | jsonl | hf")] = "jsonl",
    out: Annotated[Path | None, typer.Option("--out", "-o", help="File (jsonl) or folder")] = None,
    role: Annotated[str | None, typer.Option(help="solver | proposer")] = None,
    round_: Annotated[int | None, typer.Option("--round", help="Only this round")] = None,
    outcome: Annotated[str | None, typer.Option(help="solved | failed | timeout | error")] = None,
    tag: Annotated[
        str | None, typer.Option(help="metadata purpose/arm/tag, e.g. refresh, calibrate")
    ] = None,
    attempt: Annotated[
        list[str] | None,
        typer.Option("--attempt", help="Only this attempt id (repeatable; the round report's)."),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write the run's attempts as Harbor trajectories (ATIF), chat JSONL or an HF dataset."""

    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.export import RolloutFilter, export_rollouts
    from ..tools.run_dir import RunDir

    if fmt not in ("atif", "jsonl", "hf"):
        raise typer.BadParameter(f"--format must be atif, jsonl or hf, not {fmt!r}")
    run = RunDir(run_dir)
    if not run.has_store:
        raise typer.BadParameter(f"{run.root} has no rollouts.db; pass a flywheel run folder")
    try:
        # Validated from the user's strings: a bad --role or --outcome is a BadParameter.
        where = RolloutFilter.model_validate(
            {"role": role, "round": round_, "outcome": outcome, "tag": tag, "attempts": attempt}
        )
    except ValidationError as exc:
        raise typer.BadParameter(str(exc)) from None
    default = {"atif": "rollouts-atif", "jsonl": "rollouts.jsonl", "hf": "rollouts-hf"}[fmt]
    target = out or run.root / "export" / default
    result = export_rollouts(
        run.store,
        target,
        fmt=fmt,
        where=where,
        task_dirs=[run.pool, *sorted((run.root / "candidates").glob("r*"))],
        tools=role_tool_schemas(run.store),
    )
    if as_json:
        typer.echo(json.dumps(result.model_dump(mode="json"), indent=2))
        return
    console.print(f"{result.attempts} attempt(s) written as {fmt} to {result.path}")
