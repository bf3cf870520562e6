"""One GRPO rollout's world: a live sandbox of a Harbor task, the solver's terminal tools, its verifier.

TRL's `environment_factory` makes one `TaskEpisode` per concurrent rollout and reuses it: `reset`
starts a fresh sandbox of the row's task, the public `run` / `read_output` / `interrupt` methods
are the tools the policy calls — the served solver's terminal, defined once in
tools/agents/solver_interface.py (same names, schemas, result text, persistent shell) — and after the
episode `_finish()` runs the task's own verifier by Harbor's protocol and closes the sandbox.
A computer-use task's episode is a `DesktopTaskEpisode` (desktop_episode.py): these tools and the
served desktop tools, each call through `_act` below.

An episode that fails is never scored and never stops the job (tools/trials/faults.py decides
whose fault it is): a sandbox that does not start (`reset` records it instead of raising into
TRL), an exception from the sandbox inside a tool call (the tools answer a short error from then
on), a verifier that cannot run or gives no valid reward. `_finish()` then returns a record with
no reward and the fault; the reward function passes None to TRL, which leaves the episode out of
its group's mean and std and gives it zero advantage. A sandbox that stops while its engine
works was ended from inside by the policy's own commands: that episode scores 0, as past any
limit of its own (dropping it would let a failing policy escape its 0 by killing its sandbox).

Sandbox code is async and bound to the loop it was created on, while TRL calls tools from its own
threads; every episode therefore runs its coroutines on one shared background loop (`EventLoop`).
No torch here: the episode is testable on its own.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, Field

from ...tools.agents.solver_interface import (
    MAX_TIMEOUT_SEC,
    READ_TIMEOUT_SEC,
    RUN_TIMEOUT_SEC,
    SHELL_BUSY,
    TOOLS,
    clamp_timeout,
    first_messages,
    render_result,
)
from ...tools.sandbox.base import Sandbox
from ...tools.sandbox.shell import PersistentShell, ShellBusyError, ShellResult
from ...tools.trials.faults import Fault, Phase, TrialFailure, episode_failure

T = TypeVar("T")
log = logging.getLogger(__name__)
#: What every tool answers once the episode's sandbox has failed (the episode is not scored).
SANDBOX_UNAVAILABLE = "[error: the sandbox is unavailable]"


class LiveTask(Protocol):
    """A started task environment (training/grpo/sandboxes.py has the Harbor-backed one)."""

    @property
    def sandbox(self) -> Sandbox: ...

    async def verify(self) -> float:
        """Run the task's verifier once, after the agent is done; return the reward."""
        ...

    async def stopped(self) -> str | None:
        """Why the sandbox no longer runs when its engine says so (something inside ended it);
        None while it runs or when the engine cannot tell."""
        ...

    async def close(self) -> None: ...


StartTask = Callable[[Path], Awaitable[LiveTask]]


def episode_prompt(instruction: str, system_prompt: str | None = None) -> list[dict[str, str]]:
    """The conversation an episode starts from: the served solver's (tools/agents/solver_interface.py);
    TRL adds the tool schemas to the system turn, as the policy server does for the solver."""
    messages = first_messages(instruction)
    if system_prompt:
        messages[0] = {"role": "system", "content": system_prompt}
    return messages


def prompt_tools(episode: type[TaskEpisode] | None = None) -> list[Callable[..., str]]:
    """The tools as TRL renders them into prompts (for warm-ups and token budgeting): the
    episode class's public methods but `reset`, by name, as GRPOTrainer lists them
    (`inspect.getmembers`). `TaskEpisode` (the terminal) unless another class is given."""
    cls = episode or TaskEpisode
    instance = cls.__new__(cls)
    return [
        getattr(instance, name)
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]


class EpisodeError(RuntimeError):
    """The episode could not run as asked (no task in the row, no episode before `_finish`): our
    own bug, recorded as infrastructure (tools/trials/faults.py), never raised into TRL."""


class EventLoop:
    """A daemon thread running one asyncio loop; `run(coro)` blocks the caller for its result."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="aes-episodes", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()  # a start past its deadline must not go on in the background
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)


class EpisodeConfig(BaseModel):
    # The served terminal's ceiling (mcp_servers/terminal.py clamps to it): a lower one is for
    # tests only, or a GRPO episode lets a command run less long than serving does.
    command_timeout_sec: float = MAX_TIMEOUT_SEC
    tool_output_chars: int = 2000
    start_timeout_sec: float = 900.0  # includes a first, uncached image build
    verify_timeout_sec: float = 900.0


class EpisodeRecord(BaseModel):
    """What one finished episode did (kept for metrics and debugging)."""

    task_dir: str
    environment: str = Field(
        default="terminal", description="The episode's kind: its tools (desktop_episode.EPISODES)."
    )
    reward: float | None = Field(description="None when the episode is not scored (`fault`).")
    fault: Fault | None = Field(
        default=None, description="Why there is no reward: the task's or infrastructure."
    )
    tool_calls: int = Field(default=0, description="`run` calls and desktop actions")
    error: str | None = None
    commands: list[str] = Field(default_factory=list)
    actions: list[str] = Field(
        default_factory=list, description="Desktop tool calls (computer use), e.g. `key Return`."
    )


class TaskEpisode:
    """An `environment_factory` product. Public methods other than `reset` become tools."""

    _kind = "terminal"  # the dataset rows' `environment` that names this class

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
        self._actions: list[str] = []  # desktop tool calls (DesktopTaskEpisode)
        self._failure: TrialFailure | None = None
        self._limit: str | None = None  # the policy went past a limit of its own: scored 0

    # -- TRL hooks -----------------------------------------------------------------------------
    def reset(self, task_dir: str | None = None, **_row: Any) -> None:
        """Start a fresh sandbox of the row's task (closing the previous episode's, if any).
        Never raises into TRL: a failure is recorded and the episode is not scored."""
        self._quietly_close()
        self._task_dir = Path(task_dir) if task_dir is not None else None
        self._commands = []
        self._actions = []
        self._failure = None
        self._limit = None
        if task_dir is None:
            self._fail(EpisodeError("the dataset row has no `task_dir` column"), "start")
            return
        try:
            self._loop.run(self._open(), timeout=self._config.start_timeout_sec)
        except Exception as exc:  # noqa: BLE001 - classified and recorded: the episode is dropped
            self._fail(exc, "start")
            self._quietly_close()

    @property
    def failure(self) -> TrialFailure | None:
        """Why this episode will not be scored, once something failed; None while it runs."""
        return self._failure

    # The tools: named, typed and documented as the served solver's (tools/agents/solver_interface.py);
    # the docstrings are set from the specs below the class. No return annotation: TRL renders
    # the schema with get_json_schema, and the served schema has no "return" entry either.
    def run(self, command: str, timeout_sec: float = RUN_TIMEOUT_SEC):  # noqa: ANN201
        if self._failure is None and self._shell is not None:
            self._commands.append(command)
        timeout_sec = self._run_timeout(timeout_sec)
        return self._tool(lambda shell: shell.run(command, timeout_sec=timeout_sec))

    def read_output(self, timeout_sec: float = READ_TIMEOUT_SEC):  # noqa: ANN201
        # Outside `_tool`: a bad argument is the policy's, for TRL to report, not a sandbox fault.
        timeout_sec = clamp_timeout(timeout_sec, READ_TIMEOUT_SEC)
        return self._tool(lambda shell: shell.read(timeout_sec))

    def interrupt(self):  # noqa: ANN201
        return self._tool(lambda shell: shell.interrupt())

    # -- ours: private, because TRL exposes every public method as a tool -----------------------
    def _run_timeout(self, timeout_sec: float | None) -> float:
        """What `run` waits: the served terminal's clamp, then the episode's ceiling."""
        return min(clamp_timeout(timeout_sec, RUN_TIMEOUT_SEC), self._config.command_timeout_sec)

    def _tool(self, call: Callable[[PersistentShell], Coroutine[Any, Any, ShellResult]]) -> str:
        """One terminal tool call's answer, as the served solver's text (the shell says busy or
        idle)."""

        async def answer() -> str:
            assert self._shell is not None  # `_act` checked
            result = await call(self._shell)
            return render_result(
                result.output,
                result.exit_code,
                running=result.running,
                restarted=result.restarted,
                cap=self._config.tool_output_chars,
            )

        return self._act(answer)

    def _act(self, answer: Callable[[], Coroutine[Any, Any, str]]) -> str:
        """Run one tool call (`answer`, on the episode's loop) and return its text. The
        policy's commands fail as results (exit codes, output); any other exception here is
        the sandbox's or the engine's: the episode is marked infrastructure and every tool
        answers a short error from then on."""
        if self._failure is not None:
            return SANDBOX_UNAVAILABLE
        if self._limit is not None:
            return f"[error: the sandbox was stopped: {self._limit}]"
        if self._shell is None:
            return "[error: no sandbox is running]"
        try:
            return self._loop.run(answer())
        except ShellBusyError:  # `run` while busy: the MCP terminal's error result's text
            return SHELL_BUSY
        except Exception as exc:  # noqa: BLE001 - classified and recorded: the episode is dropped
            self._stopped_by_policy(self._loop.run(self._stopped()))
            self._fail(exc, "tool")
            return self._act(answer)  # the answer for what was recorded (no second call made)

    def _fail(self, error: BaseException, phase: Phase) -> None:
        """Record the episode's first failure (later ones follow from it): whose fault, or that
        the policy went past a limit of its own (the writable-layer cap: scored 0)."""
        if self._failure is not None or self._limit is not None:
            return
        found = episode_failure(error, phase=phase)
        if found is None:
            self._limit = self._limit_hit() or str(error)
            return
        self._failure = found
        log.warning("episode of %s not scored: %s", self._task_dir, found.describe())

    async def _stopped(self, settle_sec: float = 0.0) -> str | None:
        """Why the sandbox stopped under the episode, if its engine says it did; asked again
        for up to `settle_sec` while it still says running (it notices a dead init late)."""
        stopped = getattr(self._live, "stopped", None)
        if stopped is None:
            return None
        deadline = asyncio.get_running_loop().time() + settle_sec
        while True:
            try:
                reason = await stopped()
            except Exception:  # noqa: BLE001 - cannot tell: the failure stays infrastructure
                return None
            if reason is not None or asyncio.get_running_loop().time() >= deadline:
                return reason
            await asyncio.sleep(0.25)

    def _stopped_by_policy(self, reason: str | None) -> None:
        """A sandbox that stopped while the engine works was ended from inside, by the policy's
        own commands (`kill -KILL -1`, its memory): scored 0 like any limit of its own, never
        dropped as infrastructure (that would spare a failing attempt its 0)."""
        if reason is not None and self._failure is None and self._limit is None:
            # Our own limit that stopped it (the writable-layer cap) says more, when it did.
            hit = self._limit_hit()
            self._limit = hit or f"the sandbox stopped under the policy's commands: {reason}"

    def _limit_hit(self) -> str | None:
        """Why our limits stopped this episode's sandbox (the writable-layer cap), or None."""
        try:
            return self._live.sandbox.ref.handle.get("killed") if self._live else None
        except Exception:  # noqa: BLE001 - Harbor's own types have no sandbox of ours
            return None

    def _quietly_close(self) -> None:
        """Close what is open; a failure here ends nothing the episode still needs."""
        try:
            self._loop.run(self._close())
        except Exception as exc:  # noqa: BLE001 - the sandbox is gone or going either way
            log.warning("closing the sandbox of %s failed: %s", self._task_dir, exc)

    async def _open(self) -> None:
        assert self._task_dir is not None
        self._live = await self._start_task(self._task_dir)
        # Harbor's own types have no sandbox to attach to: their LiveTask opens a shell over exec.
        opener = getattr(self._live, "open_shell", None)
        self._shell = await (opener() if opener else self._live.sandbox.open_shell())

    async def _finish(self) -> EpisodeRecord:
        """Run the task's verifier on the sandbox as the episode left it, then close it. Never
        raises: an episode that failed (here or before) has no reward and says whose fault."""
        reward: float | None = None
        try:
            if self._failure is None and self._live is None:
                self._fail(EpisodeError("_finish() before reset(): no episode ran"), "verify")
            if self._limit is None and (hit := self._limit_hit()):
                self._limit = hit  # stopped after the last tool call: its work is gone
            if self._failure is None and self._live is not None:
                self._stopped_by_policy(await self._stopped())
            if self._failure is None and self._limit is None and self._shell is not None:
                try:
                    await self._shell.close()  # the agent's shell ends before the tests run
                    self._shell = None
                except Exception as exc:  # noqa: BLE001 - classified: the episode is dropped
                    self._fail(exc, "tool")
            if self._failure is None and self._limit is None and self._live is not None:
                try:
                    verify = self._live.verify()
                    reward = await asyncio.wait_for(verify, self._config.verify_timeout_sec)
                except Exception as exc:  # noqa: BLE001 - classified: the episode is dropped
                    # The engine may still have called the container running when asked above
                    # (a `kill -KILL -1` is noticed a moment later): ask again before blaming it.
                    self._stopped_by_policy(await self._stopped(settle_sec=2.0))
                    self._fail(exc, "verify")
        finally:
            try:
                await self._close()
            except Exception as exc:  # noqa: BLE001 - the reward (or the failure) stands
                log.warning("closing the sandbox of %s failed: %s", self._task_dir, exc)
        failure = self._failure
        if self._limit is not None and failure is None:
            reward = 0.0  # past its own limit: the sandbox, and its work with it, is gone
        return EpisodeRecord(
            task_dir=str(self._task_dir or ""),
            environment=self._kind,
            reward=None if failure is not None or reward is None else float(reward),
            fault=failure.fault if failure else None,
            error=failure.describe() if failure else self._limit,
            tool_calls=len(self._commands) + len(self._actions),
            commands=list(self._commands),
            actions=list(self._actions),
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


for _name, _spec in TOOLS.items():  # one definition of the tools' names and documentation
    getattr(TaskEpisode, _name).__doc__ = _spec.docstring()
