"""One GRPO rollout's world: a live sandbox of a Harbor task, a bash tool, the task's verifier.

TRL's `environment_factory` makes one `TaskEpisode` per concurrent rollout and reuses it: `reset`
starts a fresh sandbox of the row's task, the public `bash` method is the tool the policy calls
(the same persistent shell the solver's terminal uses: cwd and variables persist), and after the
episode `_finish()` runs the task's own verifier by Harbor's protocol and closes the sandbox.

Sandbox code is async and bound to the loop it was created on, while TRL calls tools from its own
threads; every episode therefore runs its coroutines on one shared background loop (`EventLoop`).
No torch here: the episode is testable on its own.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, Field

from autoenvscaling.tools.sandbox.base import Sandbox
from autoenvscaling.tools.sandbox.shell import PersistentShell

T = TypeVar("T")


class LiveTask(Protocol):
    """A started task environment (training/sandboxes.py has the Harbor-backed one)."""

    @property
    def sandbox(self) -> Sandbox: ...

    async def verify(self) -> float:
        """Run the task's verifier once, after the agent is done; return the reward."""
        ...

    async def close(self) -> None: ...


StartTask = Callable[[Path], Awaitable[LiveTask]]


DEFAULT_SYSTEM_PROMPT = (
    "You are a terminal agent. Solve the task in the sandbox with the bash tool; "
    "call it as often as you need, then stop."
)


def episode_prompt(instruction: str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The conversation an episode starts from (TRL adds the tool schema to the system turn)."""
    return [
        {"role": "system", "content": system_prompt or DEFAULT_SYSTEM_PROMPT},
        {"role": "user", "content": instruction.strip()},
    ]


def prompt_tools() -> list[Callable[..., str]]:
    """The tools as TRL renders them into prompts (for warm-ups and token budgeting)."""
    return [TaskEpisode.__new__(TaskEpisode).bash]


class EpisodeError(RuntimeError):
    """The episode's infrastructure failed (sandbox start, verifier run). Not the policy's fault."""


class EventLoop:
    """A daemon thread running one asyncio loop; `run(coro)` blocks the caller for its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="aes-episodes", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class EpisodeConfig(BaseModel):
    command_timeout_sec: float = 60.0
    tool_output_chars: int = 2000
    start_timeout_sec: float = 900.0  # includes a first, uncached image build
    verify_timeout_sec: float = 900.0


class EpisodeRecord(BaseModel):
    """What one finished episode did (kept for metrics and debugging)."""

    task_dir: str
    reward: float
    tool_calls: int = 0
    error: str | None = None
    commands: list[str] = Field(default_factory=list)


def format_tool_output(output: str, exit_code: int | None, running: bool, cap: int) -> str:
    """The tool result the model sees: output (head+tail capped) and how the command ended."""
    text = output
    if len(text) > cap:
        half = cap // 2
        text = f"{text[:half]}\n[... {len(text) - cap} chars cut ...]\n{text[-half:]}"
    if running:
        status = "[still running after the timeout; it was interrupted]"
    else:
        status = f"[exit code {exit_code}]"
    return f"{text.rstrip()}\n{status}" if text.strip() else status


class TaskEpisode:
    """An `environment_factory` product. Public methods other than `reset` become tools."""

    def __init__(
        self, loop: EventLoop, start_task: StartTask, config: EpisodeConfig | None = None
    ) -> None:
        self._loop = loop
        self._start_task = start_task
        self._config = config or EpisodeConfig()
        self._live: LiveTask | None = None
        self._shell: PersistentShell | None = None
        self._task_dir: Path | None = None
        self._commands: list[str] = []

    # -- TRL hooks -----------------------------------------------------------------------------
    def reset(self, task_dir: str | None = None, **_row: Any) -> None:
        """Start a fresh sandbox of the row's task (closing the previous episode's, if any)."""
        if task_dir is None:
            raise EpisodeError("the dataset row has no `task_dir` column")
        self._loop.run(self._close())
        self._task_dir = Path(task_dir)
        self._commands = []
        try:
            self._loop.run(self._open(), timeout=self._config.start_timeout_sec)
        except Exception as exc:
            raise EpisodeError(f"could not start a sandbox for {task_dir}: {exc}") from exc

    def bash(self, command: str) -> str:
        """Run a bash command in the task's terminal and return its output.

        The shell is persistent: the working directory and variables carry over between calls.

        Args:
            command: The bash command to run.

        Returns:
            The command's output (stdout and stderr) followed by its exit code.
        """
        if self._shell is None:
            return "[error: no sandbox is running]"
        self._commands.append(command)
        return self._loop.run(self._run(command))

    # -- ours: private, because TRL exposes every public method as a tool -----------------------
    async def _open(self) -> None:
        assert self._task_dir is not None
        self._live = await self._start_task(self._task_dir)
        self._shell = await self._live.sandbox.open_shell()

    async def _run(self, command: str) -> str:
        assert self._shell is not None
        result = await self._shell.run(command, timeout_sec=self._config.command_timeout_sec)
        if result.running:
            await self._shell.interrupt()
        return format_tool_output(
            result.output, result.exit_code, result.running, self._config.tool_output_chars
        )

    async def _finish(self) -> EpisodeRecord:
        """Run the task's verifier on the sandbox as the episode left it, then close it."""
        if self._live is None or self._task_dir is None:
            raise EpisodeError("_finish() before reset(): no episode ran")
        task_dir = self._task_dir
        try:
            if self._shell is not None:
                await self._shell.close()  # the agent's shell ends before the tests run
                self._shell = None
            reward = await asyncio.wait_for(self._live.verify(), self._config.verify_timeout_sec)
        except Exception as exc:
            raise EpisodeError(f"verifier of {task_dir} failed: {exc}") from exc
        finally:
            await self._close()
        return EpisodeRecord(
            task_dir=str(task_dir),
            reward=float(reward),
            tool_calls=len(self._commands),
            commands=list(self._commands),
        )

    async def _close(self) -> None:
        shell, live = self._shell, self._live
        self._shell = self._live = None
        if shell is not None:
            await shell.close()
        if live is not None:
            await live.close()

    def __del__(self) -> None:  # best effort: TRL never tells an environment it is done
        if getattr(self, "_live", None) is not None and self._loop.loop.is_running():
            try:
                asyncio.run_coroutine_threadsafe(self._close(), self._loop.loop)
            except RuntimeError:
                pass
