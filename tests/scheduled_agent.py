"""A solver with a known success rate, for calibrating the gate itself (no model): a test helper.

`ScheduledAgent` is a `ScriptAgent` that solves (runs the task's reference solution) on the
attempts its `schedule` marks and does nothing, or runs `fail_commands`, on the others. Attempts
are numbered through a counter file on the host, so the rewards of N concurrent trials are
exactly the first N schedule entries, in whatever order the trials happen to run.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import Any, override

from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext

from autoenvscaling.tools.trials.script_agent import ScriptAgent


def next_attempt(counter_file: Path) -> int:
    """Atomically take the next attempt number (0, 1, ...) from `counter_file`."""
    counter_file.parent.mkdir(parents=True, exist_ok=True)
    with open(counter_file, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        text = handle.read().strip()
        attempt = int(text) if text else 0
        handle.seek(0)
        handle.truncate()
        handle.write(str(attempt + 1))
    return attempt


class ScheduledAgent(ScriptAgent):
    def __init__(
        self,
        *args: Any,
        schedule: str | list[int | bool],
        counter_file: str,
        fail_commands: list[str] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs.pop("use_solution", None)
        super().__init__(*args, **kwargs)
        marks = list(schedule) if not isinstance(schedule, str) else [c == "1" for c in schedule]
        if not marks:
            raise ValueError("schedule must not be empty, e.g. '1010'")
        self.schedule = [bool(int(m)) for m in marks]
        self.counter_file = Path(counter_file)
        self.fail_commands = list(fail_commands or [])

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-scheduled"

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        attempt = next_attempt(self.counter_file)
        solve = self.schedule[attempt % len(self.schedule)]
        self.use_solution = solve
        if not solve:
            self.commands = [*self.fail_commands, *self.commands]
        await super().run(instruction, environment, context)
        context.metadata = {**(context.metadata or {}), "attempt": attempt, "solved": solve}
