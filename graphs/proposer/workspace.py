"""The terminal arm's tools: MCP servers over the candidate folder and a workspace sandbox."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool

from ...mcp_servers.filesystem import build_filesystem_server
from ...mcp_servers.gate import build_gate_server
from ...mcp_servers.rollouts import build_rollouts_server
from ...mcp_servers.terminal import ShellOpener, build_terminal_server
from ...tools.rollouts.postgres import is_postgres_url
from ...tools.sandbox import PersistentShell, SandboxLimits
from ...tools.sandbox.base import Shell
from ...tools.sandbox.container import start_workspace
from ...tools.sandbox.exec_shell import ExecShell
from ...tools.sandbox.harbor_backends import our_engine
from ...tools.sandbox.harbor_workspace import (
    FolderSyncShell,
    start_harbor_workspace,
    stop_harbor_workspace,
)
from ...tools.tasks.privileges import strip_privileges
from ..agent.mcp_tools import open_mcp_tools
from .settings import TASK_MOUNT, ProposerSettings

#: The tools the compact system prompt names (prompts/proposer_terminal_compact.md): a small
#: policy is served these only (17 schemas cost ~2k tokens of every call; these ~0.7k).
COMPACT_TOOLS = ("write_file", "read_file", "list_dir", "run", "check", "submit")


#: Backends whose proposer workspace is a container of ours with the candidate bound in; any
#: other name is a Harbor environment type (`harbor:<type>`), where the folder is mirrored.
BIND_BACKENDS = (None, "podman", "docker", "harbor-docker")


def workspace_with_task(
    candidate: Path,
    limits: SandboxLimits,
    backend: str | None = None,
    options: dict[str, Any] | None = None,
) -> ShellOpener:
    """A workspace sandbox per MCP session with the candidate folder at TASK_MOUNT: bound in on
    our engines; on a Harbor type (`harbor:<type>`, `options` passed through) a workspace of that
    type with the folder mirrored in and out at each command (tools/sandbox/harbor_workspace.py).

    `backend`: the gate's (harbor-docker's workspace runs on our default engine)."""
    if backend not in BIND_BACKENDS:
        return harbor_workspace_with_task(candidate, limits, str(backend), options)
    engine = our_engine(backend or "")  # None or harbor-docker: the default engine

    @asynccontextmanager
    async def open_shell() -> AsyncIterator[PersistentShell]:

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


def harbor_workspace_with_task(
    candidate: Path, limits: SandboxLimits, backend: str, options: dict[str, Any] | None
) -> ShellOpener:
    """Each MCP session: a workspace environment of `backend`, its shell over `exec`, the
    candidate folder mirrored at TASK_MOUNT; stopped when the session ends."""

    @asynccontextmanager
    async def open_shell() -> AsyncIterator[Shell]:

        environment = await start_harbor_workspace(
            backend, options, limits=limits, workdir=TASK_MOUNT
        )
        try:
            shell = ExecShell(environment, cwd=TASK_MOUNT, user="root")
            async with FolderSyncShell(shell, environment, candidate, TASK_MOUNT) as synced:
                yield synced
        finally:
            try:
                await stop_harbor_workspace(environment)
            finally:
                strip_privileges(candidate)  # as for the bind mount (the unpacking drops setid)

    return open_shell


@asynccontextmanager
async def proposer_tools(
    settings: ProposerSettings, candidate: Path
) -> AsyncIterator[list[BaseTool]]:
    """The terminal arm's MCP tools; the sandbox starts on the first terminal command. With
    `compact_prompt`, only COMPACT_TOOLS (the brief already carries the rollout evidence)."""
    gate = settings.gate
    # The desktop tools act through a sandbox of ours: not offered on a Harbor type's workspace.
    desktop = gate.backend in BIND_BACKENDS and settings.desktop_tools
    servers = {
        "terminal": build_terminal_server(
            workspace_with_task(
                candidate, settings.workspace_limits, gate.backend, gate.environment_options
            ),
            desktop=desktop and not settings.compact_prompt,
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
