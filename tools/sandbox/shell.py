"""A persistent bash session: one long-lived shell, many commands, no process spawn per command.

The protocol is plain text over the shell's stdin/stdout: each command is sent as
`eval '<command>' </dev/null` followed by a `printf` of a per-session marker carrying the exit code,
so cwd, variables and functions persist between commands exactly as in a terminal. A command that
outlives its timeout keeps running; `read()` collects more of its output and `interrupt()` kills it
(its processes, not the shell).
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import shlex
import signal
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from .base import SandboxError

if TYPE_CHECKING:
    from .base import Sandbox

Spawn = Callable[[], Awaitable[asyncio.subprocess.Process]]
Interrupt = Callable[[asyncio.subprocess.Process], Awaitable[None]]

TRUNCATION_MARK = "\n[... {n} bytes truncated ...]\n"


class ShellClosedError(SandboxError):
    """The shell is gone (closed, or its sandbox stopped)."""


class ShellBusyError(SandboxError):
    """A command is still running; read() its output or interrupt() it first."""


class ShellResult(BaseModel):
    """Output of one command (or of one `read` of a command still running)."""

    exit_code: int | None = Field(description="None while the command is still running.")
    output: str = Field(description="stdout and stderr interleaved, capped with a visible marker.")
    output_bytes: int = Field(description="Full size of the output this result covers.")
    truncated: bool = False
    duration_sec: float = Field(description="Seconds since the command started.")
    running: bool = Field(default=False, description="True when the command outlived the timeout.")
    restarted: bool = Field(
        default=False, description="True when the shell had exited and was restarted."
    )
    idle: bool = Field(default=False, description="No command was running to read or stop.")

    @classmethod
    def nothing_running(cls, exit_code: int | None) -> ShellResult:
        """What `read` / `interrupt` return with no command running: the last exit code."""
        return cls(exit_code=exit_code, output="", output_bytes=0, duration_sec=0.0, idle=True)


class PendingOutput:
    """Output not yet returned to the caller, kept as head + tail so memory stays bounded."""

    def __init__(self, cap: int) -> None:
        self.half = max(cap // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    def take(self) -> tuple[str, int, bool]:
        dropped = self.total - len(self.head) - len(self.tail)
        text = self.head.decode(errors="replace")
        if dropped > 0:
            text += TRUNCATION_MARK.format(n=dropped)
        text += self.tail.decode(errors="replace")
        total = self.total
        self.head, self.tail, self.total = bytearray(), bytearray(), 0
        return text, total, dropped > 0


class PersistentShell:
    """One long-lived bash. Use `await PersistentShell.start(spawn, ...)`."""

    def __init__(
        self,
        spawn: Spawn,
        *,
        interrupt: Interrupt | None = None,
        output_cap: int = 64_000,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self._spawn = spawn
        self._interrupt = interrupt or kill_host_descendants
        self._cap = output_cap
        self._cwd = cwd
        self._env = env or {}
        self._token = secrets.token_hex(8)
        self._seq = 0
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self._scan = bytearray()
        self._pending = PendingOutput(output_cap)
        self._changed = asyncio.Event()
        self._done_code: int | None = None
        self._running = False
        self._started_at = 0.0
        self._eof = False
        self._lock = asyncio.Lock()
        # The sandbox this shell runs in, when a sandbox opened it: the desktop tools
        # (mcp_servers/desktop.py) run their own commands there, beside the shell.
        self.sandbox: Sandbox | None = None

    @classmethod
    async def start(cls, spawn: Spawn, **kwargs: Any) -> PersistentShell:
        shell = cls(spawn, **kwargs)
        await shell._launch()
        return shell

    @property
    def busy(self) -> bool:
        return self._running

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def _launch(self) -> None:
        self._proc = await self._spawn()
        self._eof = False
        self._scan.clear()
        self._reader = asyncio.create_task(self._read_loop(self._proc))
        setup = ["exec 2>&1", "set +o history", "unset PROMPT_COMMAND", "PS1=''; PS2=''"]
        setup += [f"export {k}={shlex.quote(v)}" for k, v in self._env.items()]
        if self._cwd:
            setup.append(f"cd {shlex.quote(self._cwd)}")
        result = await self._send("; ".join(setup), timeout_sec=30)
        if result.exit_code != 0:
            raise SandboxError(f"persistent shell failed to start: {result.output.strip()}")

    async def _read_loop(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        marker = re.compile(rb"__AES_(\d+)_" + self._token.encode() + rb"__:(\d+)\n")
        while True:
            chunk = await proc.stdout.read(65536)
            if not chunk:
                try:
                    await asyncio.wait_for(wait_exit(proc), 5)
                except TimeoutError:
                    pass
                self._pending.add(bytes(self._scan))
                self._scan.clear()
                self._eof = True
                self._changed.set()
                return
            self._scan += chunk
            while match := marker.search(self._scan):
                seq, code = int(match.group(1)), int(match.group(2))
                self._pending.add(bytes(self._scan[: match.start()]))
                del self._scan[: match.end()]
                if seq == self._seq:
                    self._done_code = code
            # Keep back only what may be the start of a marker split across reads.
            keep = _marker_start(self._scan)
            self._pending.add(bytes(self._scan[:keep]))
            del self._scan[:keep]
            self._changed.set()

    async def _send(self, command: str, timeout_sec: float | None) -> ShellResult:
        assert self._proc is not None and self._proc.stdin is not None
        self._seq += 1
        self._done_code = None
        self._running = True
        self._started_at = time.monotonic()
        line = (
            f"eval {shlex.quote(command)} </dev/null\n"
            f"printf '__AES_%s_{self._token}__:%s\\n' {self._seq} \"$?\"\n"
        )
        self._proc.stdin.write(line.encode())
        await self._proc.stdin.drain()
        return await self._wait(timeout_sec)

    async def _wait(self, timeout_sec: float | None) -> ShellResult:
        deadline = None if timeout_sec is None else time.monotonic() + timeout_sec
        while self._done_code is None and not self._eof:
            self._changed.clear()
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                break
            try:
                await asyncio.wait_for(self._changed.wait(), remaining)
            except TimeoutError:
                break
        return self._result()

    def _result(self) -> ShellResult:
        text, total, truncated = self._pending.take()
        done = self._done_code is not None or self._eof
        if done:
            self._running = False
        code = self._done_code
        if code is None and self._eof:
            code = self._proc.returncode if self._proc and self._proc.returncode is not None else -1
            text += "\n[the shell exited; the next command starts a new shell]\n"
        return ShellResult(
            exit_code=code if done else None,
            output=text,
            output_bytes=total,
            truncated=truncated,
            duration_sec=round(time.monotonic() - self._started_at, 4),
            running=not done,
        )

    async def run(self, command: str, timeout_sec: float | None = 120) -> ShellResult:
        """Run one command. If it outlives `timeout_sec` it keeps running: see `read`/`interrupt`."""
        async with self._lock:
            if self._proc is None:
                raise ShellClosedError("the shell was closed")
            if self._running:
                raise ShellBusyError(
                    "a previous command is still running: read() its output or interrupt() it"
                )
            restarted = False
            if self._eof:
                await self._reap()
                await self._launch()
                restarted = True
            result = await self._send(command, timeout_sec)
            return result.model_copy(update={"restarted": restarted})

    async def read(self, timeout_sec: float = 10) -> ShellResult:
        """More output of the running command, waiting up to `timeout_sec` for it to finish."""
        async with self._lock:
            if not self._running:
                return ShellResult.nothing_running(self._done_code)
            return await self._wait(timeout_sec)

    async def interrupt(self, grace_sec: float = 3) -> ShellResult:
        """Kill the running command's processes, like Ctrl-C in a terminal.

        The shell and its state survive when the command ends within `grace_sec` (a compound
        command may still run its remaining builtins). A command that keeps spawning work (a loop)
        gets the shell restarted instead: the result says `restarted` and cwd/env are reset.
        """
        async with self._lock:
            if not self._running or self._proc is None:
                return ShellResult.nothing_running(self._done_code)
            deadline = time.monotonic() + grace_sec
            while time.monotonic() < deadline:
                await self._interrupt(self._proc)
                result = await self._wait(0.2)
                if not result.running:
                    return result
            text, total, truncated = self._pending.take()
            await self._reap()
            self._running = False
            await self._launch()
            return ShellResult(
                exit_code=130,
                output=text + "\n[interrupted: the shell was restarted]\n",
                output_bytes=total,
                truncated=truncated,
                duration_sec=round(time.monotonic() - self._started_at, 4),
                restarted=True,
            )

    async def _reap(self) -> None:
        if self._reader:
            self._reader.cancel()
        if self._proc and self._proc.returncode is None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self._proc:
            await asyncio.wait_for(wait_exit(self._proc), 10)

    async def close(self) -> None:
        if self._proc is None:
            return
        await self._reap()
        self._proc = None

    async def __aenter__(self) -> PersistentShell:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


async def wait_exit(proc: asyncio.subprocess.Process) -> int:
    """Wait for the process to exit. (`proc.wait()` on Python 3.12.1 also waits for its pipes
    to close, which a background child can hold open for ever.) A pidfd wakes us at the exit."""
    if proc.returncode is None:
        try:
            fd = os.pidfd_open(proc.pid)
        except (OSError, AttributeError):
            fd = -1
        if fd >= 0:
            loop = asyncio.get_running_loop()
            exited = loop.create_future()
            loop.add_reader(fd, lambda: exited.done() or exited.set_result(None))
            try:
                await exited
            finally:
                loop.remove_reader(fd)
                os.close(fd)
    delay = 0.0002  # asyncio's child watcher records the exit status a moment later
    while proc.returncode is None:
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.02)
    return proc.returncode


_MARKER_HEAD = b"__AES_"


def _marker_start(buffer: bytearray) -> int:
    """Index where a possibly incomplete marker begins at the end of `buffer` (len if none)."""
    found = buffer.rfind(_MARKER_HEAD)
    if found != -1 and len(buffer) - found < 80:
        return found
    for size in range(min(len(_MARKER_HEAD) - 1, len(buffer)), 0, -1):
        if buffer.endswith(_MARKER_HEAD[:size]):
            return len(buffer) - size
    return len(buffer)


def host_descendants(root_pid: int) -> list[int]:
    """All descendants of `root_pid` on this host, parents before children (via /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # The comm field may contain spaces; the ppid is the 2nd field after the closing paren.
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    order, queue = [], list(children.get(root_pid, []))
    while queue:
        pid = queue.pop(0)
        order.append(pid)
        queue.extend(children.get(pid, []))
    return order


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


async def kill_host_descendants(proc: asyncio.subprocess.Process) -> None:
    """Interrupt for shells whose processes are visible in this host's /proc (local bash).

    The shell is the first `bash` at or under the spawned process (nsenter forks it); everything
    below the shell is the running command and is killed, the shell itself is kept.
    """
    candidates = [proc.pid, *host_descendants(proc.pid)]
    shell_pid = next((pid for pid in candidates if _comm(pid) == "bash"), proc.pid)
    for pid in reversed(host_descendants(shell_pid)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
