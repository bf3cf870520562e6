"""A computer-use task's GRPO episode: the terminal's tools and the served desktop tools.

The served solver binds screenshot, key, type_text and click beside the terminal on a computer-use
task (tools/tasks/domains.py `needs_desktop`); `DesktopTaskEpisode` gives its GRPO episode the same
tools: named and documented from DESKTOP_TOOLS (TRL renders them with get_json_schema into the
served schemas), acting through the functions the MCP server serves (tools/sandbox/desktop.py) on
the episode's sandbox as the task's agent user, and answering the text the served loop shows the
model (`DesktopResult.model_text` through `render_mcp_result`). The worker routes each dataset row by `environment` (`EPISODES`, TRL's dict
`environment_factory`), so a terminal task's prompt and tools stay the terminal's alone.

Arguments come from the policy unchecked (TRL passes the parsed JSON): they are validated as the
MCP server's pydantic schema would (lax: "12" is 12), and a bad one is an error the model reads,
never an exception that would drop the episode as infrastructure.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from ...tools.agents.solver_interface import DESKTOP_TOOLS, render_mcp_result
from ...tools.sandbox import desktop
from ...tools.sandbox.desktop import DesktopResult, Execs
from ...tools.sandbox.exec_shell import EnvironmentExec
from ...tools.tasks.domains import needs_desktop
from .episode_env import TaskEpisode

EpisodeKind = Literal["terminal", "desktop"]


class _Key(BaseModel):
    keys: str


class _Text(BaseModel):
    text: str


class _Click(BaseModel):
    x: int
    y: int
    button: Literal["left", "middle", "right"] = "left"
    double: bool = False


class DesktopTaskEpisode(TaskEpisode):
    """A TaskEpisode with the desktop tools (TRL lists them with the terminal's, by name)."""

    _kind = "desktop"

    # No return annotations (see TaskEpisode); `button: str`, not a Literal, because the served
    # schema (DESKTOP_TOOLS) is a plain string, and get_json_schema would add an enum.
    def screenshot(self):  # noqa: ANN201
        return self._desktop("screenshot", lambda box, user: desktop.screenshot(box, user=user))

    def key(self, keys: str):  # noqa: ANN201
        args = self._valid(_Key, keys=keys)
        if isinstance(args, str):
            return args
        return self._desktop(
            f"key {args.keys}", lambda box, user: desktop.key(box, args.keys, user=user)
        )

    def type_text(self, text: str):  # noqa: ANN201
        args = self._valid(_Text, text=text)
        if isinstance(args, str):
            return args
        return self._desktop(
            f"type_text {len(args.text)} characters",
            lambda box, user: desktop.type_text(box, args.text, user=user),
        )

    def click(self, x: int, y: int, button: str = "left", double: bool = False):  # noqa: ANN201
        args = self._valid(_Click, x=x, y=y, button=button, double=double)
        if isinstance(args, str):
            return args
        return self._desktop(
            f"click {args.button} ({args.x}, {args.y})" + (" twice" if args.double else ""),
            lambda box, user: desktop.click(
                box, args.x, args.y, args.button, args.double, user=user
            ),
        )

    # -- ours ----------------------------------------------------------------------------------
    @staticmethod
    def _valid[M: BaseModel](model: type[M], **args: Any) -> M | str:
        """The arguments as the MCP server's schema reads them, or the error the model reads."""
        try:
            return model.model_validate(args)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:4]
            )
            return f"[error: invalid arguments: {problems}]"

    def _desktop(self, action: str, call: Callable[[Execs, Any], Awaitable[DesktopResult]]) -> str:
        """One desktop tool call: the MCP server's function on this episode's sandbox, as the
        task's agent user (the shell's user; the served terminal's desktop runs as it too), its
        result as the served loop's text. A SandboxError is the sandbox's (or the policy's, when
        it ended its sandbox): `_act` classifies it as it does the terminal's."""
        if self._failure is None and self._shell is not None:
            self._actions.append(action[:200])  # the policy's keys: any length

        async def answer() -> str:
            sandbox = _sandbox_of(self._live)
            if sandbox is None:
                return f"[error: {desktop.NO_SANDBOX}]"
            result = await call(sandbox, getattr(self._live, "agent_user", None))
            text = result.model_text()
            return render_mcp_result(text, cap=self._config.tool_output_chars)

        return self._act(answer)


def _sandbox_of(live: Any) -> Execs | None:
    """The live task's sandbox of ours; on Harbor's own types its environment's exec (the shell
    runs over it too); None before an episode started."""
    try:
        return live.sandbox
    except AttributeError:
        environment = getattr(live, "environment", None)
        return EnvironmentExec(environment) if environment is not None else None


for _name, _spec in DESKTOP_TOOLS.items():  # one definition of the tools' names and documentation
    getattr(DesktopTaskEpisode, _name).__doc__ = _spec.docstring()

#: TRL's dict `environment_factory` keys: the episode class of each kind of task.
EPISODES: dict[str, type[TaskEpisode]] = {c._kind: c for c in (TaskEpisode, DesktopTaskEpisode)}


def episode_kind(task_dir: Path | str) -> EpisodeKind:
    """The episode a task's rows train in: the tools its served solver binds."""
    return "desktop" if needs_desktop(task_dir) else "terminal"
