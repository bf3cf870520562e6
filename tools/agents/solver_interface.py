"""The solver's interface, defined once: system prompt, tools, tool-result text, first messages.

Three places show a policy the terminal and must show it the same way, or the policy is trained
on one interface and acts with another:
- the served solver (graphs/solver/harbor_agent.py) binds `openai_tools()` to the model and turns each MCP
  terminal result into text with `render_mcp_result`;
- the MCP terminal server (mcp_servers/terminal.py) names and describes its tools from `TOOLS`;
- the GRPO episode (training/grpo/episode_env.py) exposes methods named and documented from `TOOLS`
  (TRL renders them with transformers' `get_json_schema`, which reads exactly the docstring
  `ToolSpec.docstring()` writes) and renders shell results with `render_result`.
`tests/test_agent_interface.py` renders the first model input of both paths with one tokenizer
and asserts the token ids are equal.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel

from ...prompts import load_prompt
from ..text_cap import cap_text

#: The tool result a model sees is capped to this many bytes (head + tail), on every path.
OUTPUT_CHARS = 2000
#: The solver's turn limit (model calls per attempt) wherever none is given: the flywheel's
#: `solver_max_turns`, `autoenvscaling solve`, the solver graph served to Studio, the gate's
#: calibration solver and a GRPO episode (TRL's tool-calling iterations) all default to it. Only
#: the embedded preset differs (graphs/config.py: a 135M policy on 2 CPU cores).
SOLVER_MAX_TURNS = 8
RUN_TIMEOUT_SEC = 60.0
READ_TIMEOUT_SEC = 10.0
MAX_TIMEOUT_SEC = 600.0
#: What read_output and interrupt say when no command is running (the shell's `idle` result).
IDLE_NOTE = "no command is running"
#: The whole text the model reads when it calls `run` while the previous command still runs (the
#: shell's ShellBusyError): the MCP terminal's error result and the GRPO episode's answer, as is.
SHELL_BUSY = (
    "[error: the previous command is still running: call read_output to wait for it "
    "or interrupt to stop it, then run again]"
)


class ToolParam(BaseModel):
    name: str
    type: Literal["string", "number", "integer", "boolean"]
    description: str
    required: bool = True


class ToolSpec(BaseModel):
    name: str
    description: str
    params: list[ToolParam] = []

    def openai(self) -> dict[str, Any]:
        """The OpenAI tool schema, key for key what `get_json_schema` makes of `docstring()`."""
        parameters: dict[str, Any] = {
            "type": "object",
            "properties": {
                p.name: {"type": p.type, "description": p.description} for p in self.params
            },
        }
        required = [p.name for p in self.params if p.required]
        if required:
            parameters["required"] = required
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": parameters,
            },
        }

    def docstring(self) -> str:
        """A Google-style docstring for a Python method implementing this tool."""
        if not self.params:
            return self.description
        args = "\n".join(f"    {p.name}: {p.description}" for p in self.params)
        return f"{self.description}\n\nArgs:\n{args}"


# Sorted by name: TRL lists an environment's methods alphabetically, so the served list matches.
TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in sorted(
        (
            ToolSpec(
                name="run",
                description="Run a bash command in a persistent shell (cwd and variables carry "
                "over); returns its output and exit code. A command still running after "
                "timeout_sec keeps running: see read_output and interrupt.",
                params=[
                    ToolParam(
                        name="command", type="string", description="The bash command to run."
                    ),
                    ToolParam(
                        name="timeout_sec",
                        type="number",
                        description=f"Seconds to wait (default {RUN_TIMEOUT_SEC:g}).",
                        required=False,
                    ),
                ],
            ),
            ToolSpec(
                name="read_output",
                description="Wait up to timeout_sec for more output of the running command.",
                params=[
                    ToolParam(
                        name="timeout_sec",
                        type="number",
                        description=f"Seconds to wait (default {READ_TIMEOUT_SEC:g}).",
                        required=False,
                    )
                ],
            ),
            ToolSpec(
                name="interrupt",
                description="Stop the running command (like Ctrl-C).",
            ),
        ),
        key=lambda spec: spec.name,
    )
}


#: The desktop tools (computer use: tools/sandbox/desktop.py), bound beside TOOLS only for a task
#: that needs them (a `computer-use` task: tools/tasks/domains.py `needs_desktop`;
#: SolverSettings.desktop_tools). The GRPO episode of such a task has them too
#: (training/grpo/desktop_episode.py `DesktopTaskEpisode`).
DESKTOP_TOOLS: dict[str, ToolSpec] = {
    spec.name: spec
    for spec in sorted(
        (
            ToolSpec(
                name="screenshot",
                description="Take a screenshot of the sandbox's X display :99 (started on first "
                "use with a window manager; run GUI programs with DISPLAY=:99). Returns the image "
                "and a text line: its size and the visible windows' titles and geometry.",
            ),
            ToolSpec(
                name="key",
                description="Press keys on the X display (xdotool key names, space-separated; "
                "chords with +): e.g. 'ctrl+s', 'Tab Tab space', 'Return', 'shift+Tab'.",
                params=[
                    ToolParam(
                        name="keys", type="string", description="Key names separated by spaces."
                    )
                ],
            ),
            ToolSpec(
                name="type_text",
                description="Type text on the X display into the focused window, as keystrokes.",
                params=[ToolParam(name="text", type="string", description="The text to type.")],
            ),
            ToolSpec(
                name="click",
                description="Move the mouse to (x, y) on the X display (pixels from the top-left "
                "corner, as in the screenshot) and click a button.",
                params=[
                    ToolParam(name="x", type="integer", description="Pixels from the left edge."),
                    ToolParam(name="y", type="integer", description="Pixels from the top edge."),
                    ToolParam(
                        name="button",
                        type="string",
                        description="left (default), middle or right.",
                        required=False,
                    ),
                    ToolParam(
                        name="double",
                        type="boolean",
                        description="Double-click (default false).",
                        required=False,
                    ),
                ],
            ),
        ),
        key=lambda spec: spec.name,
    )
}


def openai_tools(*, desktop: bool = False) -> list[dict[str, Any]]:
    """The solver's tool schemas; `desktop`: DESKTOP_TOOLS too. Sorted by name, as TRL lists an
    episode's methods (inspect.getmembers), so a trained prompt lists them in the served order."""
    specs = [*TOOLS.values(), *(DESKTOP_TOOLS.values() if desktop else ())]
    return [spec.openai() for spec in sorted(specs, key=lambda spec: spec.name)]


def system_prompt() -> str:
    return load_prompt("solver").strip()


def first_messages(instruction: str) -> list[dict[str, str]]:
    """The conversation every solver attempt and every GRPO episode starts from."""
    return [
        {"role": "system", "content": system_prompt()},
        {"role": "user", "content": instruction.strip()},
    ]


def clamp_timeout(timeout_sec: float | None, default: float) -> float:
    value = default if timeout_sec is None else float(timeout_sec)
    return max(0.0, min(value, MAX_TIMEOUT_SEC))


def render_result(
    output: str,
    exit_code: int | None,
    *,
    running: bool = False,
    restarted: bool = False,
    note: str | None = None,
    cap: int = OUTPUT_CHARS,
) -> str:
    """The text a model sees for one terminal result: capped output, then how it stands."""
    text = cap_text(output, cap).text.rstrip()
    if running:
        status = "[still running: call read_output to wait for it, or interrupt to stop it]"
    elif exit_code is None:
        status = f"[{note or IDLE_NOTE}]"
    else:
        status = f"[exit code {exit_code}]"
    if restarted:
        status += "\n[the shell was restarted: cwd and environment variables were reset]"
    return f"{text}\n{status}" if text else status


def render_mcp_result(text: str, cap: int = OUTPUT_CHARS) -> str:
    """An MCP terminal result (TerminalResult JSON) as `render_result` text; other text as is."""
    try:
        data = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return text
    if not isinstance(data, dict) or "output" not in data or "running" not in data:
        return text
    return render_result(
        str(data.get("output") or ""),
        data.get("exit_code"),
        running=bool(data.get("running")),
        restarted=bool(data.get("restarted")),
        note=data.get("note"),
        cap=cap,
    )
