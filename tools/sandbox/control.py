"""A root control channel into a container: one long-lived bash serving many exec calls.

Each API exec costs a fresh engine round trip (~0.2 s quiet, ~0.6 s loaded); a Harbor trial makes
about eight. The channel is one `exec -i bash` opened at start; each call runs its command in a
child `bash -c` with the same script, env and cwd as `ContainerSandbox.exec`, stdout and stderr
to files in a root-only folder (never the channel's own stream), and the channel then prints a
per-call random header with the exit code and sizes followed by the (capped) bytes.

It serves only calls it can run exactly (root, valid env names) and only one at a time: a call
it cannot serve, a concurrent call, or any call after the channel died (an agent may kill it)
returns None and the caller falls back to the API exec. A command's timeout kills the
processes carrying its mark, as the API path does.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shlex
import time
import uuid
from typing import TYPE_CHECKING

from .base import ExecOutput, SandboxError
from .engine import cli_argv
from .shell import TRUNCATION_MARK

if TYPE_CHECKING:
    from .container import ContainerSandbox

CONTROL_MARK = "AUTOENVSCALING_CONTROL"
#: The environment mark of one exec's processes, so a timeout or an interrupt can find and kill
#: exactly them (container.py sets it on engine execs, this channel on its own).
EXEC_MARK = "AUTOENVSCALING_EXEC"
ROOT_USERS = ("", "root", "0")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
OPEN_TIMEOUT_SEC = 60.0
# After a timeout kill, how long the channel may take to report the killed command.
KILLED_GRACE_SEC = 10.0
START_TIMEOUT_SEC = 30.0
KILLED = "control channel killed under the command"
# What the channel checks it has before serving anything.
SETUP = r"""
for t in mktemp stat head tail cat rm; do command -v "$t" >/dev/null || exit 3; done
stat -c %s /dev/null >/dev/null 2>&1 || exit 3  # bookworm's runsc: statx EINVAL (runtimes.py)
umask 077
d=$(mktemp -d /tmp/.aes-control.XXXXXXXX) || exit 3
emit() { s=$(stat -c %s "$1") || s=0; if [ "$s" -le "$2" ]; then cat "$1"; else head -c "$3" "$1"; tail -c "$3" "$1"; fi; }
printf '%s ready\n' "$1"
"""


class ControlChannel:
    """One root bash in the container, serving `exec` calls one at a time."""

    def __init__(self, box: ContainerSandbox, proc: asyncio.subprocess.Process, mark: str) -> None:
        self._box = box
        self._proc = proc
        self._mark = mark
        self._lock = asyncio.Lock()
        self.dead = False
        self.served = 0

    @classmethod
    async def open(cls, box: ContainerSandbox) -> ControlChannel | None:
        """The channel, or None when this container cannot have one (no bash, no coreutils)."""
        argv0, cli_env = cli_argv(box.ref.backend)
        mark = f"{CONTROL_MARK}={uuid.uuid4().hex}"
        ready = secrets.token_hex(16)
        proc = await asyncio.create_subprocess_exec(
            *argv0,
            "exec",
            "-i",
            "-u",
            "0",
            "-e",
            mark,
            box.container_id,
            "bash",
            "--noprofile",
            "--norc",
            "-s",
            "--",
            ready,
            env=cli_env,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        channel = cls(box, proc, mark)
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(SETUP.encode())
            await proc.stdin.drain()
            line = await asyncio.wait_for(proc.stdout.readline(), OPEN_TIMEOUT_SEC)
        except (TimeoutError, OSError):
            line = b""
        if line.strip() != f"{ready} ready".encode():
            await channel.close()
            return None
        return channel

    @staticmethod
    def can_serve(env: dict[str, str], user: str) -> bool:
        return user in ROOT_USERS and all(_NAME.match(key) for key in env)

    async def exec(
        self,
        script: str,
        *,
        env: dict[str, str],
        user: str,
        mark_key: str,
        timeout_sec: float | None,
        cap: int,
    ) -> ExecOutput | None:
        """The command's result, or None: not run, the caller runs it through the API exec."""
        if self.dead or self._lock.locked() or not self.can_serve(env, user):
            return None
        async with self._lock:
            return await self._exec(script, env, mark_key, timeout_sec, cap)

    async def _exec(
        self, script: str, env: dict[str, str], mark_key: str, timeout_sec: float | None, cap: int
    ) -> ExecOutput | None:
        proc = self._proc
        assert proc.stdin is not None and proc.stdout is not None
        half = max(cap // 2, 1)
        nonce = secrets.token_hex(16)
        exports = "".join(
            f"export {k}={shlex.quote(v)}; " for k, v in {**env, EXEC_MARK: mark_key}.items()
        )
        # The command's own subshell gets the env; the channel's bash keeps none of it.
        line = (
            f"printf '%s start\\n' {nonce}; read -r _ || exit; "
            f'if : >"$d/o" 2>/dev/null && : >"$d/e" 2>/dev/null; then '
            f"( unset SHLVL OLDPWD {CONTROL_MARK}; {exports}exec bash -c {shlex.quote(script)} ) "
            f'</dev/null >"$d/o" 2>"$d/e"; c=$?; '
            f'printf \'%s %s %s %s\\n\' {nonce} "$c" "$(stat -c %s "$d/o")" '
            f'"$(stat -c %s "$d/e")"; '
            f'emit "$d/o" {2 * half} {half}; emit "$d/e" {2 * half} {half}; '
            f'rm -f "$d/o" "$d/e"; '
            f"else printf '%s fail\\n' {nonce}; fi\n"
        )
        started = time.monotonic()
        try:
            proc.stdin.write(line.encode())
            await proc.stdin.drain()
        except (OSError, RuntimeError):
            await self._die()
            return None
        ran: list[bool] = []
        try:
            # The command waits for our go, so one that never started is never run twice.
            await asyncio.wait_for(self._header(nonce, ran, until_start=True), START_TIMEOUT_SEC)
            proc.stdin.write(b"go\n")
            await proc.stdin.drain()
        except (TimeoutError, EOFError, OSError, ValueError, RuntimeError):
            await self._die()
            return None
        timed_out = False
        try:
            header = await asyncio.wait_for(self._header(nonce, ran), timeout_sec)
        except TimeoutError:
            timed_out = True
            await self._box._kill_marked(f"{EXEC_MARK}={mark_key}", keep_top=False)
            try:
                header = await asyncio.wait_for(self._header(nonce, ran), KILLED_GRACE_SEC)
            except (TimeoutError, EOFError, OSError, ValueError):
                await self._die()
                return exec_output(None, "", "", started, True, False)
        except asyncio.CancelledError:
            await asyncio.shield(self._box._kill_marked(f"{EXEC_MARK}={mark_key}", keep_top=False))
            await asyncio.shield(self._die())
            raise
        except (EOFError, OSError, ValueError):
            await self._die()
            if not ran:
                return None  # died before the command started (killed between calls)
            # Died under the command (an agent's `kill -9 -1` kills it with everything else):
            # what the API exec reports for a killed command.
            await self._die()
            return self._killed_under(started)
        if header is None:
            return None  # the output files could not be opened: the API exec runs it
        code, out_size, err_size = header
        try:
            stdout = await self._body(out_size, half)
            stderr = await self._body(err_size, half)
        except (EOFError, OSError, asyncio.IncompleteReadError):
            await self._die()
            return self._killed_under(started)
        self.served += 1
        truncated = out_size > 2 * half or err_size > 2 * half
        return exec_output(
            None if timed_out else code, stdout, stderr, started, timed_out, truncated
        )

    def _killed_under(self, started: float) -> ExecOutput:
        if why := self._box.ref.handle.get("killed"):
            raise SandboxError(f"sandbox {self._box.ref.id}: exec failed: {why}")  # as the API
        return exec_output(137, "", KILLED, started)

    async def _header(
        self, nonce: str, ran: list[bool], until_start: bool = False
    ) -> tuple[int, int, int] | None:
        assert self._proc.stdout is not None
        prefix = f"{nonce} ".encode()
        while True:
            line = await self._proc.stdout.readline()
            if not line:
                raise EOFError("control channel closed")
            at = line.find(prefix)
            if at < 0:
                continue  # nothing else should write here; stray bytes are skipped, not trusted
            fields = line[at + len(prefix) :].split()
            if fields == [b"start"]:
                ran.append(True)
                if until_start:
                    return None
                continue
            if until_start:
                raise ValueError("control channel: a header before the start line")
            if fields == [b"fail"]:
                return None
            code, out_size, err_size = (int(f) for f in fields)
            return code, out_size, err_size

    async def _body(self, size: int, half: int) -> str:
        assert self._proc.stdout is not None
        if size <= 2 * half:
            return (await self._proc.stdout.readexactly(size)).decode(errors="replace")
        head = await self._proc.stdout.readexactly(half)
        tail = await self._proc.stdout.readexactly(half)
        return (
            head.decode(errors="replace")
            + TRUNCATION_MARK.format(n=size - 2 * half)
            + tail.decode(errors="replace")
        )

    async def _die(self) -> None:
        self.dead = True
        await self.close()

    async def close(self, *, reap_inside: bool = True) -> None:
        """End the channel; `reap_inside=False` when the whole container is about to go."""
        self.dead = True
        proc = self._proc
        if proc.returncode is None:
            try:
                if proc.stdin is not None:
                    proc.stdin.close()
                proc.kill()
            except ProcessLookupError:
                pass
            try:
                await asyncio.wait_for(proc.wait(), 10)
            except TimeoutError:
                pass
        if reap_inside and not self._box._closed:
            # Killing the CLI does not end the bash it started inside: end it there.
            await self._box._kill_marked(self._mark, keep_top=False)


def exec_output(
    code: int | None,
    stdout: str,
    stderr: str,
    started: float,
    timed_out: bool = False,
    truncated: bool = False,
) -> ExecOutput:
    """The output of a command started at `started` (monotonic), for every exec path."""
    return ExecOutput(
        exit_code=code,
        stdout=stdout,
        stderr=stderr,
        duration_sec=time.monotonic() - started,
        timed_out=timed_out,
        truncated=truncated,
    )
