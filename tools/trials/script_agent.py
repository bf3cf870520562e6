"""A Harbor agent that needs no model: it runs fixed shell commands in the trial's sandbox.

Used for gate calibration with known success rates, for probes (what can an agent see?), and as
the "cheat agent" baseline. `commands` run in order; `use_solution=True` first uploads the task's
reference solution and runs it, like Harbor's oracle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, override

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext


class NoWebTools(BaseAgent):
    """An agent with no web tools of its own: when Harbor's policy asks it to disable them,
    nothing is to be done (the sandbox's network policy is the only control), and nothing is
    logged. Harbor's default logs an ERROR on every such trial."""

    @override
    async def set_web_tools_disabled(self, disabled: bool, environment: BaseEnvironment) -> None:
        return None


class PlainAgent(NoWebTools):
    """A Harbor agent with nothing to install: version "1", an empty `setup`."""

    @override
    def version(self) -> str:
        return "1"

    @override
    async def setup(self, environment: BaseEnvironment) -> None:
        return None


class ScriptAgent(PlainAgent):
    def __init__(
        self,
        *args: Any,
        commands: list[str] | None = None,
        use_solution: bool = False,
        task_dir: str | None = None,
        timeout_sec: int = 300,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.commands = list(commands or [])
        self.use_solution = use_solution
        self.task_dir = Path(task_dir) if task_dir else None
        self.timeout_sec = timeout_sec

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-script"

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        log: list[dict[str, Any]] = []
        if self.use_solution:
            if self.task_dir is None:
                raise ValueError("use_solution needs task_dir")
            await environment.upload_dir(self.task_dir / "solution", "/solution")
            self.commands.insert(0, "bash /solution/solve.sh")
        for command in self.commands:
            result = await environment.exec(command, timeout_sec=self.timeout_sec)
            log.append(
                {
                    "command": command,
                    "exit_code": result.return_code,
                    "stdout": (result.stdout or "")[-2000:],
                    "stderr": (result.stderr or "")[-2000:],
                }
            )
        if self.use_solution:
            await environment.exec("rm -rf /solution")
        context.metadata = {**(context.metadata or {}), "script": log}
