"""Child processes that must not outlive the run that started them (model server, GRPO worker)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable


def watch_parent(
    parent_pid: int,
    on_orphan: Callable[[], None],
    interval_sec: float = 0.5,
    grace_sec: float = 5.0,
) -> None:
    """Once `parent_pid` is no longer our parent (it died; we were re-parented): call
    `on_orphan`, and exit for good `grace_sec` later whatever it did.

    Polling is used rather than PR_SET_PDEATHSIG because that signal fires when the parent
    *thread* that spawned us exits, and the spawning thread may be a short-lived worker thread.
    """

    def loop() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval_sec)
        _then_exit(on_orphan, grace_sec)

    threading.Thread(target=loop, name="parent-watch", daemon=True).start()


def watch_process(
    pid: int, on_gone: Callable[[], None], interval_sec: float = 0.5, grace_sec: float = 5.0
) -> None:
    """As `watch_parent`, for an ancestor that is not our parent (a launcher sits between): once
    `pid` no longer exists, call `on_gone` and exit `grace_sec` later."""

    def alive() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True  # exists, owned by someone else
        return True

    def loop() -> None:
        while alive():
            time.sleep(interval_sec)
        _then_exit(on_gone, grace_sec)

    threading.Thread(target=loop, name="ancestor-watch", daemon=True).start()


def _then_exit(last_words: Callable[[], None], grace_sec: float) -> None:
    """`last_words`, then exit whatever it did. It may well fail: a worker's report goes to the
    dead parent's pipe (BrokenPipeError), and a raise here once ended the watching thread, not
    the process: a killed run's GRPO worker went on generating, its sandboxes up, measured."""
    try:
        last_words()
    finally:  # os._exit ends the process before any exception from last_words goes further
        time.sleep(grace_sec)
        os._exit(1)
