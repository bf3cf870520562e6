"""What a crash of a supervised policy server is, and how a model call learns that one killed it.

`EmbeddedLlamaServer` watches its process (a thread blocked on its exit, so a crash is seen the
moment it happens, not after a model call's retries) and records each crash here as a
`ServerCrash`: the exit signal or code, the last lines of the server's log and the log's path.

A model client knows only the endpoint's URL, so the record is looked up by URL:
`crash_during(base_url, since)` tells a model call that failed whether the server behind it
crashed while the call was in flight (or is down for good). The agent loop then ends the attempt
as an infrastructure failure naming the crash instead of retrying it: the request in flight may
be the one that killed the server, and replaying it would crash the restarted one too.
Only URLs of servers this process supervises are registered, each while its server runs.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

from pydantic import BaseModel, Field

#: Lines of the server log a crash message carries.
LOG_TAIL_LINES = 20


class ServerCrash(BaseModel):
    """One death of a policy server process that nobody asked for."""

    base_url: str
    pid: int
    returncode: int = Field(description="Popen's: negative is the signal that ended it")
    log_path: Path | None
    log_tail: str = Field(description="The log's last lines when the crash was seen")
    at: float = Field(description="time.monotonic() when the exit was seen")
    crash_number: int = Field(ge=1, description="1 for the first crash of this server, ...")
    restarting: bool = Field(description="True: the server is started again on the same URL")

    @staticmethod
    def exit_text(returncode: int | None) -> str:
        """'killed by SIGSEGV', or 'exited with code 1' (Popen's returncode)."""
        if returncode is None:
            return "still running"
        if returncode < 0:
            try:
                return f"killed by {signal.Signals(-returncode).name}"
            except ValueError:
                return f"killed by signal {-returncode}"
        return f"exited with code {returncode}"

    @property
    def how(self) -> str:
        return self.exit_text(self.returncode)

    def describe(self) -> str:
        then = (
            "it is started again once on the same URL with the checkpoint it served"
            if self.restarting
            else "it is not started again (a second crash stops the run)"
            if self.crash_number > 1
            else "it could not be started again"
        )
        log = str(self.log_path) if self.log_path else "no log"
        tail = self.log_tail.strip() or "(the log is empty)"
        return (
            f"the policy server at {self.base_url} (pid {self.pid}) {self.how} "
            f"(crash {self.crash_number}); {then}. Last lines of its log {log}:\n{tail}"
        )


class PolicyServerCrashed(RuntimeError):
    """The policy server died: an infrastructure failure (tools/trials/faults.py), not the model's
    nor the task's. `crash` says how and holds the log's tail."""

    def __init__(self, crash: ServerCrash) -> None:
        super().__init__(crash.describe())
        self.crash = crash


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES, max_chars: int = 4000) -> str:
    """The log's last `lines` lines; when they end a faulthandler report, from its first line
    ("Fatal Python error: ...", then the crashed thread's stack first), cut in the middle."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, 2)
            fh.seek(max(0, fh.tell() - 64_000))
            text = fh.read().decode(errors="replace")
    except OSError:
        return ""
    all_lines = text.splitlines()
    starts = [i for i, line in enumerate(all_lines) if line.startswith("Fatal Python error")]
    if starts and len(all_lines) - starts[-1] > lines:
        report = all_lines[starts[-1] :]
        head = report[: lines * 2]
        tail = all_lines[-5:] if len(report) > lines * 2 + 5 else report[lines * 2 :]
        kept = head + (["..."] if len(report) > lines * 2 + 5 else []) + tail
    else:
        kept = all_lines[-lines:]
    out = "\n".join(kept)
    return (
        out if len(out) <= max_chars else out[: max_chars // 2] + "\n...\n" + out[-max_chars // 2 :]
    )


class _Record:
    """The crash state of one supervised URL, shared by the watcher thread and model calls."""

    def __init__(self) -> None:
        self.crashes: list[ServerCrash] = []
        self.down = False  # down for good: nothing will answer on this URL again
        self.changed = threading.Condition()


_records: dict[str, _Record] = {}
_lock = threading.Lock()


def _key(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1")


def register(base_url: str) -> None:
    """Start recording crashes for the server at `base_url` (its own supervisor calls this)."""
    with _lock:
        _records[_key(base_url)] = _Record()


def unregister(base_url: str) -> None:
    with _lock:
        _records.pop(_key(base_url), None)


def record_crash(crash: ServerCrash, *, down: bool) -> None:
    """Called by the supervisor the moment the process exit is seen."""
    with _lock:
        rec = _records.get(_key(crash.base_url))
    if rec is None:
        return
    with rec.changed:
        rec.crashes.append(crash)
        rec.down = rec.down or down
        rec.changed.notify_all()


def mark_down(base_url: str) -> None:
    """The restart failed: the URL will not answer again."""
    with _lock:
        rec = _records.get(_key(base_url))
    if rec is None:
        return
    with rec.changed:
        rec.down = True
        rec.changed.notify_all()


#: Exception classes (by name: clients vendor their own httpx, e.g. openai's `httpx2`) that
#: mean the connection was dropped or refused.
_LOST_CONNECTION = frozenset({"TransportError", "APIConnectionError", "ConnectionError"})


def _lost_connection(error: BaseException | None) -> bool:
    """Whether `error` (or what it was raised from) is a dropped or refused connection."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if any(cls.__name__ in _LOST_CONNECTION for cls in type(error).__mro__):
            return True
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return False


def crash_during(
    base_url: str | None,
    since: float,
    error: BaseException | None = None,
    settle_sec: float = 2.0,
) -> ServerCrash | None:
    """The crash that ended a model call to `base_url` begun at `since` (time.monotonic()), or
    None when no supervised server there crashed since then (the call failed otherwise).

    When `error` is a lost connection, waits up to `settle_sec` for the record: the client sees
    its connection reset a moment before the supervisor has reaped the process. Blocking: only
    called after a call failed (from async code, in a thread)."""
    if not base_url:
        return None
    with _lock:
        rec = _records.get(_key(base_url))
    if rec is None:
        return None
    deadline = time.monotonic() + (settle_sec if _lost_connection(error) else 0.0)
    with rec.changed:
        while True:
            recent = [c for c in rec.crashes if c.at >= since]
            if recent:
                return recent[-1]
            if rec.down and rec.crashes:
                return rec.crashes[-1]
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            rec.changed.wait(left)
