"""The terminal arm's tools: MCP servers over the candidate folder and a workspace sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from langchain_core.tools import BaseTool

from autoenvscaling.graphs.mcp_tools import open_mcp_tools
from autoenvscaling.graphs.proposer.settings import TASK_MOUNT, ProposerSettings
from autoenvscaling.mcp_servers.filesystem import build_filesystem_server
from autoenvscaling.mcp_servers.gate import build_gate_server
from autoenvscaling.mcp_servers.rollouts import build_rollouts_server
from autoenvscaling.mcp_servers.terminal import ShellOpener, build_terminal_server
from autoenvscaling.tools.rollouts.postgres import is_postgres_url
from autoenvscaling.tools.sandbox import PersistentShell, SandboxLimits
from autoenvscaling.tools.tasks.privileges import strip_privileges

#: The tools the compact system prompt names (prompts/proposer_terminal_compact.md): a small
#: policy is served these only (17 schemas cost ~2k tokens of every call; these ~0.7k).
COMPACT_TOOLS = ("write_file", "read_file", "list_dir", "run", "check", "submit")


def workspace_with_task(
    candidate: Path, limits: SandboxLimits, backend: str | None = None
) -> ShellOpener:
    """A workspace sandbox per MCP session with the candidate folder bound in at TASK_MOUNT.

    `backend`: the engine (the gate's when it is podman or docker; else the default)."""
    engine = backend if backend in ("podman", "docker") else None

    @asynccontextmanager
    async def open_shell() -> AsyncIterator[PersistentShell]:
        from autoenvscaling.tools.sandbox.container import start_workspace

        sandbox = await start_workspace(
            backend=engine,
            limits=limits,
            workdir=TASK_MOUNT,
            binds=[(candidate, TASK_MOUNT)],
        )
        try:
            async with sandbox:
                yield await sandbox.open_shell()
        finally:
            # Container root wrote the folder: nothing it made may carry privilege on the host
            # (the bind is nosuid and setid modes are refused; FIFOs and hard links are not).
            strip_privileges(candidate)

    return open_shell


@asynccontextmanager
async def proposer_tools(
    settings: ProposerSettings, candidate: Path
) -> AsyncIterator[list[BaseTool]]:
    """The terminal arm's MCP tools; the sandbox starts on the first terminal command. With
    `compact_prompt`, only COMPACT_TOOLS (the brief already carries the rollout evidence)."""
    servers = {
        "terminal": build_terminal_server(
            workspace_with_task(candidate, settings.workspace_limits, settings.gate.backend),
            desktop=settings.desktop_tools and not settings.compact_prompt,
        ),
        "filesystem": build_filesystem_server(candidate),
        "gate": build_gate_server(candidate, settings.gate),
    }
    compact = settings.compact_prompt
    if (
        settings.solver_feedback
        and not compact
        and settings.store_path
        # A PostgreSQL store is on a server: there is no file to wait for.
        and (is_postgres_url(settings.store_path) or Path(settings.store_path).exists())
    ):
        servers["rollouts"] = build_rollouts_server(settings.store_path)
    async with open_mcp_tools(servers) as tools:
        yield [t for t in tools if t.name in COMPACT_TOOLS] if compact else tools
