"""Live progress for the commands a person waits on: done/total, current stage, elapsed, ETA.

One small wrapper over `rich.progress`: shown only on a terminal and never under `--json`
(machine output stays clean, logs stay free of redraw codes); otherwise every call is a no-op,
so callers wire it in unconditionally.

    with TaskProgress("validate", total=len(tasks), quiet=as_json) as progress:
        ...; progress.status("word-count: oracle"); ...; progress.advance()
"""

from __future__ import annotations

from types import TracebackType
from typing import Self

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

__all__ = ["TaskProgress"]


class TaskProgress:
    """A progress bar of `total` units of work, or nothing when not wanted (see module doc)."""

    def __init__(
        self,
        label: str,
        total: int | None,
        *,
        quiet: bool = False,
        console: Console | None = None,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = not quiet and self.console.is_terminal
        self.label = label
        self.total = total
        self.done = 0
        self._progress: Progress | None = None
        self._task: TaskID | None = None

    def __enter__(self) -> Self:
        if self.enabled:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[status]}"),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                console=self.console,
                transient=False,
            )
            self._progress.start()
            self._task = self._progress.add_task(self.label, total=self.total, status="")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def advance(self, n: int = 1, status: str | None = None) -> None:
        self.done += n
        if self._progress is not None and self._task is not None:
            if status is None:
                self._progress.update(self._task, advance=n)
            else:
                self._progress.update(self._task, advance=n, status=status)

    def set_total(self, total: int) -> None:
        """For work whose size is known only once it starts (training steps)."""
        self.total = total
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, total=total)

    def status(self, text: str) -> None:
        """What is running now (a task and its stage), shown next to the count."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, status=text)

    def print(self, *objects: object) -> None:
        """A line above the bar (or plainly, when there is no bar)."""
        self.console.print(*objects)
