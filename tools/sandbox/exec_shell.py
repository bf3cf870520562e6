"""The persistent shell's face over a Harbor environment's `exec`, for environments with no live
process to attach to (Harbor's own types: `harbor:<type>`).

Each command is one `exec` of bash. What a terminal keeps between commands — the working folder
and exported variables — is carried in a state file inside the sandbox, written after every
command and sourced before the next, so `cd` and `export` behave as in `PersistentShell`.
What differs: a command never outlives its call. One that runs past its timeout is stopped by the
provider and reported with exit code 124 and a note; `read` and `interrupt` then find nothing
running. Shell functions and unexported variables do not carry over.
"""

from __future__ import annotations

import math
import shlex
import time
from typing import Any

from autoenvscaling.tools.sandbox.shell import TRUNCATION_MARK, ShellResult

STATE_FILE = "/tmp/.aes-exec-shell-state"
TIMED_OUT_CODE = 124


def _script(command: str) -> str:
    state = shlex.quote(STATE_FILE)
    return (
        f"[ -f {state} ] && . {state} >/dev/null 2>&1\n"
        f"eval {shlex.quote(command)} </dev/null 2>&1\n"
        "__aes_rc=$?\n"
        f"{{ export -p; printf 'cd %q\\n' \"$PWD\"; }} > {state} 2>/dev/null\n"
        "exit $__aes_rc\n"
    )


def _cap(text: str, cap: int) -> tuple[str, bool]:
    data = text.encode(errors="replace")
    if len(data) <= cap:
        return text, False
    half = max(cap // 2, 1)
    dropped = len(data) - 2 * half
    head = data[:half].decode(errors="replace")
    tail = data[-half:].decode(errors="replace")
    return head + TRUNCATION_MARK.format(n=dropped) + tail, True


class ExecShell:
    """`run` / `read` / `interrupt` / `close` / `busy` as `PersistentShell`, over `exec`."""

    def __init__(self, environment: Any, *, output_cap: int = 64_000) -> None:
        self._environment = environment
        self._cap = output_cap
        self._last_code: int | None = None

    @property
    def busy(self) -> bool:
        return False  # every command ends within its call

    async def run(self, command: str, timeout_sec: float | None = 120) -> ShellResult:
        started = time.monotonic()
        timeout = None if timeout_sec is None else max(1, math.ceil(timeout_sec))
        try:
            # bash explicitly: providers differ in the shell `exec` uses (`export -p`, `%q`).
            script = f"bash -c {shlex.quote(_script(command))}"
            result = await self._environment.exec(script, timeout_sec=timeout)
        except Exception as exc:  # noqa: BLE001 - providers signal a timeout by raising
            if "timed out" not in str(exc).lower() and "timeout" not in type(exc).__name__.lower():
                raise
            self._last_code = TIMED_OUT_CODE
            note = f"[timed out after {timeout} s: the command was stopped]\n"
            return ShellResult(
                exit_code=TIMED_OUT_CODE,
                output=note,
                output_bytes=len(note),
                duration_sec=round(time.monotonic() - started, 4),
            )
        text = (result.stdout or "") + (result.stderr or "")
        output, truncated = _cap(text, self._cap)
        self._last_code = result.return_code
        return ShellResult(
            exit_code=result.return_code,
            output=output,
            output_bytes=len(text.encode(errors="replace")),
            truncated=truncated,
            duration_sec=round(time.monotonic() - started, 4),
        )

    async def read(self, timeout_sec: float = 10) -> ShellResult:
        return ShellResult.nothing_running(self._last_code)

    async def interrupt(self, grace_sec: float = 3) -> ShellResult:
        return await self.read()

    async def close(self) -> None:
        return None
