"""MCP terminal server: one persistent shell per MCP session inside a sandbox.

The server either attaches to a live sandbox by its `SandboxRef` (the graph, a Harbor agent or
another process started it), runs each session's shell over a Harbor environment's `exec` (any
environment type: `exec_shells`, tools/sandbox/exec_shell.py), or starts a bare workspace sandbox
of its own for each session.
`run` waits up to its timeout; a command that outlives it keeps running, and `read_output` /
`interrupt` deal with it, as in a real terminal. cwd and environment persist between calls.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from typing import Annotated, Any

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from ..tools.agents.solver_interface import (
    IDLE_NOTE,
    READ_TIMEOUT_SEC,
    RUN_TIMEOUT_SEC,
    SHELL_BUSY,
    TOOLS,
    clamp_timeout,
)
from ..tools.sandbox import (
    Backend,
    PersistentShell,
    SandboxLimits,
    SandboxRef,
    ShellResult,
    attach,
)
from ..tools.sandbox.base import Shell
from ..tools.sandbox.desktop import Execs
from ..tools.sandbox.exec_shell import ExecShell
from ..tools.sandbox.shell import ShellBusyError
from ..tools.text_cap import cap_text
from .desktop import NO_SANDBOX, DesktopError, add_desktop_tools

ShellOpener = Callable[[], AbstractAsyncContextManager[Shell]]
"""Opens one shell for one MCP session and cleans up after it (the sandbox too, if it owns it)."""

DEFAULT_OUTPUT_CAP = 16_000


class TerminalResult(BaseModel):
    exit_code: int | None = Field(description="None while the command is still running.")
    output: str = Field(description="stdout and stderr interleaved; long output keeps head + tail.")
    output_bytes: int = Field(description="Full size of the output this result covers.")
    truncated: bool
    duration_sec: float = Field(description="Seconds since the command started.")
    running: bool = Field(description="The command outlived the timeout and is still running.")
    restarted: bool = Field(description="The shell was restarted: cwd and environment were reset.")
    note: str | None = Field(
        default=None, description="What to do next, when there is something to say."
    )


def attached_shells(ref: SandboxRef, *, cwd: str | None = None) -> ShellOpener:
    """Each session opens a shell in the live sandbox `ref` points at; the sandbox stays up."""

    @asynccontextmanager
    async def open_shell() -> AsyncIterator[PersistentShell]:
        sandbox = await attach(ref)
        async with sandbox:  # an attached sandbox closes only the shells it opened
            yield await sandbox.open_shell(cwd=cwd)

    return open_shell


def exec_shells(
    environment: Any, *, cwd: str | None = None, user: str | int | None = None
) -> ShellOpener:
    """Each session runs its shell over `environment`'s `exec` (a Harbor `BaseEnvironment` of
    any type, started by someone else, who stops it); `user` None: its default user."""

    @asynccontextmanager
    async def open_shell() -> AsyncIterator[ExecShell]:
        async with ExecShell(environment, cwd=cwd, user=user) as shell:
            yield shell

    return open_shell


def workspace_shells(
    *,
    limits: SandboxLimits | None = None,
    network: bool = False,
    workdir: str = "/workspace",
    backend: Backend | None = None,
) -> ShellOpener:
    """Each session starts a bare workspace sandbox of its own and stops it when the session ends.

    `backend`: the engine (default: AUTOENVSCALING_ENGINE, podman)."""

    @asynccontextmanager
    async def open_shell() -> AsyncIterator[PersistentShell]:
        # lazy: the container stack (docker's SDK: ~200 modules) only once a session opens
        from ..tools.sandbox.container import start_workspace

        sandbox = await start_workspace(
            backend=backend, limits=limits, network=network, workdir=workdir
        )
        async with sandbox:
            yield await sandbox.open_shell()

    return open_shell


class _Session:
    """One MCP session's shell, opened on first use so listing tools starts no sandbox."""

    def __init__(self, opener: ShellOpener) -> None:
        self._opener = opener
        self._stack = AsyncExitStack()
        self._shell: Shell | None = None
        self._lock = anyio.Lock()

    async def shell(self) -> Shell:
        async with self._lock:
            if self._shell is None:
                self._shell = await self._stack.enter_async_context(self._opener())
            return self._shell

    async def close(self) -> None:
        await self._stack.aclose()


def build_terminal_server(
    opener: ShellOpener | None = None,
    *,
    ref: SandboxRef | None = None,
    output_cap: int = DEFAULT_OUTPUT_CAP,
    name: str = "terminal",
    desktop: bool = False,
) -> FastMCP:
    """A terminal over `opener`'s shells; or attached to `ref`; or a workspace sandbox per session.

    `desktop`: also the computer-use tools (screenshot, key, type_text, click: desktop.py) on the
    same sandbox's X display."""
    if opener is None:
        opener = attached_shells(ref) if ref is not None else workspace_shells()
    chosen = opener
    return _new_server(lambda: chosen, output_cap=output_cap, name=name, desktop=desktop)


class _Held:
    """The opener a pooled server's sessions use: set by whoever holds the server."""

    opener: ShellOpener | None = None

    def current(self) -> ShellOpener:
        if self.opener is None:
            raise RuntimeError("a pooled terminal server was connected to while nobody held it")
        return self.opener


_POOL: dict[tuple[bool, int], list[tuple[FastMCP, _Held]]] = collections.defaultdict(list)


@contextmanager
def pooled_terminal_server(
    opener: ShellOpener, *, desktop: bool = False, output_cap: int = DEFAULT_OUTPUT_CAP
) -> Iterator[FastMCP]:
    """`build_terminal_server(opener, ...)` from a per-process pool, for the holder's sessions.

    Every solver episode serves its own terminal: FastMCP's constructor reads its settings from
    the environment (pydantic-settings), ~5% of an episode's CPU at 64 in flight. A server keeps
    no state of its own between sessions (each session's shell lives in its lifespan), so one
    held by nobody serves the next holder's opener."""
    free = _POOL[(desktop, output_cap)]
    if free:
        server, held = free.pop()
    else:
        held = _Held()
        server = _new_server(held.current, output_cap=output_cap, name="terminal", desktop=desktop)
    held.opener = opener
    try:
        yield server
    finally:
        held.opener = None
        free.append((server, held))


def _new_server(
    opener_now: Callable[[], ShellOpener], *, output_cap: int, name: str, desktop: bool
) -> FastMCP:
    """The terminal server; each session opens its shell with `opener_now()`'s opener."""

    @asynccontextmanager
    async def lifespan(_server: FastMCP) -> AsyncIterator[_Session]:
        session = _Session(opener_now())
        try:
            yield session
        finally:
            # Shielded: the session's task group is being cancelled, but the sandbox must go.
            with anyio.CancelScope(shield=True):
                await session.close()

    server = FastMCP(
        name,
        # INFO would log every request (and set the root logger's level in embedding apps).
        log_level="WARNING",
        lifespan=lifespan,
        instructions=(
            "A bash terminal in a sandbox. State (cwd, variables) persists between run calls. "
            "A command that outlives timeout_sec keeps running: call read_output to wait for "
            "more, or interrupt to stop it."
        ),
        # Built once per output cap: a tool's schema is ~7 ms of pydantic work, per server.
        tools=list(_terminal_tools(output_cap)),
    )

    if desktop:

        async def sandbox_of(ctx: Context) -> Execs:
            # Our sandbox where the shell is attached to one; else the exec shell's environment.
            shell = await shell_of(ctx)
            host = shell.sandbox if shell.sandbox is not None else getattr(shell, "execs", None)
            if host is None:
                raise DesktopError(NO_SANDBOX)
            return host

        add_desktop_tools(server, sandbox_of)
    return server


@functools.lru_cache(maxsize=16)
def _terminal_tools(output_cap: int) -> tuple[Tool, ...]:
    """run, read_output and interrupt, for any terminal server with this output cap: they hold
    no server state (each call finds its session's shell through the request's context)."""

    def present(result: ShellResult) -> TerminalResult:
        capped = cap_text(result.output, output_cap)
        note = None
        if result.running:
            note = (
                "still running: call read_output to wait for more output, or interrupt to stop it"
            )
        elif result.restarted:
            note = "the shell was restarted: cwd and environment variables were reset"
        elif result.idle:
            note = IDLE_NOTE
        return TerminalResult(
            exit_code=result.exit_code,
            output=capped.text,
            output_bytes=max(result.output_bytes, capped.total_bytes),
            truncated=result.truncated or capped.truncated,
            duration_sec=result.duration_sec,
            running=result.running,
            restarted=result.restarted,
            note=note,
        )

    def busy() -> CallToolResult:
        """`run` while the previous command still runs: an error result (the call did not run,
        which is what isError says in MCP) whose text is SHELL_BUSY exactly, as the GRPO episode
        answers it. Raised instead, it would reach the model as FastMCP's "Error executing tool
        run: ..." FastMCP checks even an error result against the output schema: it carries the
        shell's state (a command running) as a TerminalResult."""
        state = TerminalResult(
            exit_code=None,
            output="",
            output_bytes=0,
            truncated=False,
            duration_sec=0.0,
            running=True,
            restarted=False,
            note=SHELL_BUSY,
        )
        return CallToolResult(
            content=[TextContent(type="text", text=SHELL_BUSY)],
            structuredContent=state.model_dump(mode="json"),
            isError=True,
        )

    # Names, descriptions and the busy / idle wording come from the one solver interface
    # (tools/agents/solver_interface.py), which the served solver binds and the GRPO episode
    # mirrors; whether the shell is busy or idle, the shell itself says.
    async def run(
        command: Annotated[str, Field(description=_param("run", "command"))],
        ctx: Context,
        timeout_sec: Annotated[
            float, Field(description=_param("run", "timeout_sec"))
        ] = RUN_TIMEOUT_SEC,
    ) -> TerminalResult:
        shell = await shell_of(ctx)
        try:
            return present(await shell.run(command, clamp_timeout(timeout_sec, RUN_TIMEOUT_SEC)))
        except ShellBusyError:
            # FastMCP sends a returned CallToolResult as it is (its return type stays
            # TerminalResult: that is the tool's output schema).
            return busy()  # pyright: ignore[reportReturnType]

    async def read_output(
        ctx: Context,
        timeout_sec: Annotated[
            float, Field(description=_param("read_output", "timeout_sec"))
        ] = READ_TIMEOUT_SEC,
    ) -> TerminalResult:
        shell = await shell_of(ctx)
        return present(await shell.read(clamp_timeout(timeout_sec, READ_TIMEOUT_SEC)))

    async def interrupt(ctx: Context) -> TerminalResult:
        return present(await (await shell_of(ctx)).interrupt())

    destructive = ToolAnnotations(destructiveHint=True, openWorldHint=False)
    return (
        Tool.from_function(
            run, name="run", description=TOOLS["run"].description, annotations=destructive
        ),
        Tool.from_function(
            read_output,
            name="read_output",
            description=TOOLS["read_output"].description,
            annotations=ToolAnnotations(readOnlyHint=True, openWorldHint=False),
        ),
        Tool.from_function(
            interrupt,
            name="interrupt",
            description=TOOLS["interrupt"].description,
            annotations=destructive,
        ),
    )


async def shell_of(ctx: Context) -> Shell:
    """The calling MCP session's shell (opened on first use)."""
    session: _Session = ctx.request_context.lifespan_context
    return await session.shell()


def _param(tool: str, name: str) -> str:
    return next(p.description for p in TOOLS[tool].params if p.name == name)
