"""The persistent shell's behaviour over a sandbox's `exec` alone, for environments with no live
process to attach to (Harbor's own types: `harbor:<type>`; any `BaseEnvironment`).

Each command runs as a background job inside the sandbox (exec_scripts.py), so it behaves as in
`PersistentShell`: `run` waits up to its timeout and a command that outlives it keeps running
(`read` collects more output, `interrupt` kills its processes and keeps the shell's state, or
restarts the shell when the command will not stop); output is capped to its head and tail with
the same marker; cwd, exported variables and functions carry from one command to the next (a
state file in the sandbox); `exit` ends the shell and the next command starts a fresh one.
Unexported variables and shell options do not carry over. Costs one `exec` per short command
(more for a long one: one per minute of waiting).
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from typing import TYPE_CHECKING, Any

from . import exec_scripts as scripts
from .base import ExecOutput, SandboxError
from .shell import (
    PendingOutput,
    ShellBusyError,
    ShellClosedError,
    ShellResult,
)

if TYPE_CHECKING:
    from .base import Sandbox

EXITED_NOTE = "\n[the shell exited; the next command starts a new shell]\n"
RESTARTED_NOTE = "\n[interrupted: the shell was restarted]\n"
#: Slack on top of the wait an `exec` spends in the sandbox, for the provider's round trip.
EXEC_SLACK_SEC = 60


class _Output(PendingOutput):
    """A command's output not yet returned: head and tail kept, the middle counted (the
    persistent shell's), fed one report at a time."""

    def add_report(self, head: bytes, tail: bytes, total: int) -> None:
        """One report's new output: `total` bytes of which `head` starts and `tail` ends it."""
        self.add(head)
        gap = total - len(head) - len(tail)
        if gap > 0:  # the middle never left the sandbox: what came before it is no tail
            self.total += gap
            self.tail.clear()
        self.add(tail)


class EnvironmentExec:
    """Our `Sandbox.exec` over a Harbor environment's `exec`: what the desktop tools
    (tools/sandbox/desktop.py) need of a sandbox, on a type with nothing of ours to attach to.
    `user`: who runs a command that names none (None: the environment's default user)."""

    def __init__(self, environment: Any, *, user: str | int | None = None) -> None:
        self._environment = environment
        self._user = user

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
    ) -> ExecOutput:
        started = time.monotonic()
        try:
            done = await self._environment.exec(
                command,
                cwd=cwd,
                env=env,
                timeout_sec=math.ceil(timeout_sec) if timeout_sec else None,
                user=user if user is not None else self._user,
            )
        except (TimeoutError, RuntimeError) as exc:
            # Harbor's types signal a timeout as RuntimeError("Command timed out after N s").
            if isinstance(exc, RuntimeError) and "timed out" not in str(exc):
                raise SandboxError(f"the environment's exec failed: {exc}") from exc
            return ExecOutput(
                exit_code=None, timed_out=True, duration_sec=time.monotonic() - started
            )
        except Exception as exc:  # noqa: BLE001 - the provider's failure, whatever its type
            raise SandboxError(f"the environment's exec failed: {exc}") from exc
        return ExecOutput(
            exit_code=done.return_code,
            stdout=done.stdout or "",
            stderr=done.stderr or "",
            duration_sec=time.monotonic() - started,
        )


class ExecShell:
    """`run` / `read` / `interrupt` / `close` / `busy` as `PersistentShell`, over `exec`.

    `environment`: anything with Harbor's `exec(command, cwd=, env=, timeout_sec=, user=)`.
    `user`: who runs the commands (None: the environment's default user)."""

    def __init__(
        self,
        environment: Any,
        *,
        output_cap: int = 64_000,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
    ) -> None:
        self._environment = environment
        self._half = max(output_cap // 2, 1)
        self._cwd = cwd
        self._env = dict(env or {})
        self._user = user
        token = secrets.token_hex(8)
        self._base = f"/tmp/.aes-exec-{token}"
        self._mark = f"__AES_EXEC_{token}__"
        self._seq = 0
        self._offset = 0
        self._pending = _Output(output_cap)
        self._running = False
        self._reset_next = False  # the last command ended the shell: start the next afresh
        self._last_code: int | None = None
        self._started_at = 0.0
        self._closed = False
        self._lock = asyncio.Lock()
        # No sandbox of ours to attach to: the desktop tools act through `execs` instead.
        self.sandbox: Sandbox | None = None
        self.execs = EnvironmentExec(environment, user=user)

    @property
    def busy(self) -> bool:
        return self._running

    @property
    def _job(self) -> str:
        return f"{self._base}/{self._seq}"

    async def run(self, command: str, timeout_sec: float | None = 120) -> ShellResult:
        """Run one command. If it outlives `timeout_sec` it keeps running: see `read`/`interrupt`."""
        async with self._lock:
            if self._closed:
                raise ShellClosedError("the shell was closed")
            if self._running:
                raise ShellBusyError(
                    "a previous command is still running: read() its output or interrupt() it"
                )
            restarted, self._reset_next = self._reset_next, False
            self._seq += 1
            self._offset = 0
            self._started_at = time.monotonic()
            job = scripts.job_script(
                command, job=self._job, state=f"{self._base}/state", cwd=self._cwd, env=self._env
            )
            start = scripts.launch(job, base=self._base, job=self._job, reset=restarted)
            self._running = True
            result = await self._follow(start, timeout_sec)
            return result.model_copy(update={"restarted": restarted})

    async def read(self, timeout_sec: float = 10) -> ShellResult:
        """More output of the running command, waiting up to `timeout_sec` for it to finish."""
        async with self._lock:
            if not self._running:
                return ShellResult.nothing_running(self._last_code)
            return await self._follow("", timeout_sec)

    async def interrupt(self, grace_sec: float = 3) -> ShellResult:
        """Kill the running command's processes, like Ctrl-C; the shell and its state survive
        unless the command keeps spawning work past `grace_sec` (then `restarted`)."""
        async with self._lock:
            if not self._running:
                return ShellResult.nothing_running(self._last_code)
            kill = scripts.kill_tree(self._job, int(grace_sec * 1000))
            return self._result(await self._step(kill, 0))

    async def close(self) -> None:
        """End a command still running and remove the shell's files (best effort: the sandbox
        may already be gone)."""
        if self._closed:
            return
        self._closed = True
        script = scripts.kill_tree(self._job, 0) if self._running else ""
        try:
            await self._environment.exec(
                f"bash -c {scripts.quote(script + f'rm -rf {scripts.quote(self._base)}')}",
                timeout_sec=30,
                user=self._user,
            )
        except Exception:  # noqa: BLE001 - closing a shell whose sandbox stopped is not an error
            pass

    async def __aenter__(self) -> ExecShell:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _follow(self, first: str, timeout_sec: float | None) -> ShellResult:
        """`first` (the launch, or nothing) then waits of at most CHUNK_MS each until the job
        ends or `timeout_sec` has passed since this call began."""
        deadline = None if timeout_sec is None else time.monotonic() + max(timeout_sec, 0)
        prefix = first
        while True:
            left = scripts.CHUNK_MS if deadline is None else (deadline - time.monotonic()) * 1000
            wait_ms = max(0, min(scripts.CHUNK_MS, math.ceil(left)))
            state = await self._step(prefix + scripts.wait(self._job, wait_ms), wait_ms)
            prefix = ""
            if state != "r" or wait_ms < scripts.CHUNK_MS:
                return self._result(state)

    async def _step(self, script: str, wait_ms: int) -> str:
        """One `exec`: `script`, then the report; its new output kept, the job's state returned."""
        full = script + scripts.report(
            self._job, offset=self._offset, half=self._half, mark=self._mark
        )
        try:
            done = await self._environment.exec(
                f"bash -c {scripts.quote(full)}",
                timeout_sec=math.ceil(wait_ms / 1000) + EXEC_SLACK_SEC,
                user=self._user,
            )
        except BaseException:
            self._give_up()
            raise
        try:
            report = scripts.parse(done.stdout or "", self._mark)
        except scripts.ReportError as exc:
            self._give_up()
            detail = f"{exc}; exit {done.return_code}, stderr {(done.stderr or '')[-300:]!r}"
            raise SandboxError(f"the exec shell got no report: {detail}") from None
        self._pending.add_report(report.head, report.tail, max(report.size - self._offset, 0))
        self._offset = max(report.size, self._offset)
        return report.state

    def _give_up(self) -> None:
        """The command's fate is unknown (the exec failed): the shell is given up, as a
        terminal whose connection dropped; the next command starts afresh."""
        self._running = False
        self._reset_next = True

    def _result(self, state: str) -> ShellResult:
        """The output kept since the last result, and what the job's `state` says."""
        text, total, truncated = self._pending.take()
        kind, _, code_text = state.partition(":")
        code = int(code_text) if code_text.lstrip("-").isdigit() else -1
        restarted = False
        if kind == "r":
            return ShellResult(
                exit_code=None,
                output=text,
                output_bytes=total,
                truncated=truncated,
                duration_sec=round(time.monotonic() - self._started_at, 4),
                running=True,
            )
        self._running = False
        if kind == "k":  # the interrupt had to end the shell: it starts afresh
            code, text, restarted = 130, text + RESTARTED_NOTE, True
        elif kind != "d":  # `exit` in the command, or the job vanished
            text += EXITED_NOTE
            self._reset_next = True
        self._last_code = code
        return ShellResult(
            exit_code=code,
            output=text,
            output_bytes=total,
            truncated=truncated,
            duration_sec=round(time.monotonic() - self._started_at, 4),
            restarted=restarted,
        )
