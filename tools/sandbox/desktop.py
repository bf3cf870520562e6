"""The desktop of a sandbox (computer use): screenshot, key, type_text and click on its X display.

The tools' one implementation, over a Sandbox: the MCP terminal server serves them
(mcp_servers/desktop.py, `build_terminal_server(..., desktop=True)`) and a computer-use task's
GRPO episode calls them (training/grpo/desktop_episode.py). Each runs its own short command in the
sandbox through its exec path (never through the shell, which may be busy with the agent's
command), as the agent's user. The display (Xvfb :99, 1024x768, and matchbox-window-manager,
which maximises each window so a screenshot's coordinates are the window's) starts on the first
call and keeps running, as the agent's own `DISPLAY=:99` programs expect. An image without the X
tools gets an error that names the Debian packages.

A screenshot is a text line that describes it and the PNG; a text-only model reads the line and
`[image image/png]` for the image (`DesktopResult.model_text`, by tools/rollouts/transcripts.py's
content_text, as the served loop renders the MCP blocks), in serving and in training alike.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import shlex
from collections.abc import Awaitable
from typing import Protocol

from pydantic import BaseModel, Field, ValidationError

from ..rollouts.transcripts import content_text
from .base import ExecOutput

DISPLAY = ":99"
SCREEN = (1024, 768)
EXEC_TIMEOUT_SEC = 30.0
MAX_TYPE_CHARS = 2000
MAX_KEYS = 50
#: The most PNG bytes one screenshot may return (the exec path caps output at 1 MB; base64 is 4/3).
MAX_PNG_BYTES = 600_000
MISSING_TOOLS = (
    "this sandbox has no X tools (Xvfb, xdotool): its image needs the Debian packages xvfb, "
    "xdotool and matchbox-window-manager (and python3-pil for screenshots); the project's "
    "offline base image (`make bases`) has them"
)
# An xdotool key name or chord: keysyms (Return, ctrl+s, shift+Tab, F2, a, 5, KP_Enter, ...).
_KEY = re.compile(r"^[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*$")

# Starts the display once; a second caller finds it up. Every background process gets no stdio
# of the exec (it would hold the exec's streams open) and its own session.
_ENSURE = f"""
export DISPLAY={DISPLAY}
if ! command -v Xvfb >/dev/null || ! command -v xdotool >/dev/null; then exit 96; fi
if ! xdotool getdisplaygeometry >/dev/null 2>&1; then
  setsid Xvfb {DISPLAY} -screen 0 {SCREEN[0]}x{SCREEN[1]}x24 -nolisten tcp \
    >/tmp/.xvfb.log 2>&1 </dev/null &
  for _ in $(seq 100); do xdotool getdisplaygeometry >/dev/null 2>&1 && break; sleep 0.05; done
  if command -v matchbox-window-manager >/dev/null; then
    setsid matchbox-window-manager -use_titlebar no >/dev/null 2>&1 </dev/null &
    sleep 0.3
  fi
fi
xdotool getdisplaygeometry >/dev/null 2>&1 || {{ echo "X display {DISPLAY} did not start:"; \
  tail -n 5 /tmp/.xvfb.log; exit 97; }}
"""

# Prints one JSON object: the screen's size, the visible named windows and the active one, and
# the PNG (base64) when Pillow is there. Run with python3 -I: nothing of the agent's on sys.path.
_DESCRIBE = r"""
import base64, io, json, subprocess, sys
def xdo(*args):
    r = subprocess.run(["xdotool", *args], capture_output=True, text=True, timeout=10)
    return r.stdout.strip() if r.returncode == 0 else ""
def window(wid):
    name = xdo("getwindowname", wid)
    geo = xdo("getwindowgeometry", "--shell", wid)
    g = dict(line.split("=", 1) for line in geo.splitlines() if "=" in line)
    return {"id": wid, "name": name, "x": int(g.get("X", 0)), "y": int(g.get("Y", 0)),
            "width": int(g.get("WIDTH", 0)), "height": int(g.get("HEIGHT", 0))}
ids = xdo("search", "--onlyvisible", "--name", ".").split()
wins = [w for w in (window(i) for i in ids[:20]) if w["name"]]
active = xdo("getactivewindow")
out = {"screen": xdo("getdisplaygeometry"), "windows": wins,
       "active": next((w["name"] for w in wins if w["id"] == active), None)}
if sys.argv[1:] == ["png"]:
    try:
        from PIL import ImageGrab
    except ImportError:
        out["error"] = "no screenshot tool: the image needs the Debian package python3-pil"
    else:
        image = ImageGrab.grab(xdisplay=":99").convert("RGB")
        buf = io.BytesIO()
        image.save(buf, "PNG", optimize=True)
        if buf.tell() > 600_000:
            buf = io.BytesIO()
            image.resize((image.width // 2, image.height // 2)).save(buf, "PNG", optimize=True)
        out["png"] = base64.b64encode(buf.getvalue()).decode()
        out["size"] = list(image.size)
print(json.dumps(out))
"""


class DesktopError(RuntimeError):
    """The desktop could not act; the message is what the model reads."""


class Window(BaseModel):
    id: str
    name: str
    x: int
    y: int
    width: int
    height: int


class ScreenState(BaseModel):
    """What the sandbox's describe script reports (every field checked: the sandbox is hostile)."""

    screen: str = Field(max_length=40)
    windows: list[Window] = Field(max_length=20)
    active: str | None = None
    png: str | None = Field(default=None, max_length=4 * MAX_PNG_BYTES // 3 + 8)
    size: list[int] | None = Field(default=None, min_length=2, max_length=2)
    error: str | None = Field(default=None, max_length=500)

    def summary(self) -> str:
        wins = "; ".join(f"{_quote(w.name)} {w.width}x{w.height}+{w.x}+{w.y}" for w in self.windows)
        active = _quote(self.active) if self.active else "none"
        return f"active window: {active}; windows: {wins or 'none'}"


def _quote(name: str) -> str:
    return json.dumps(name[:80], ensure_ascii=False)


#: What the model reads when a terminal's shell has no sandbox of ours (served or trained).
NO_SANDBOX = "this terminal's shell runs in no sandbox: no desktop"


class Execs(Protocol):
    """What the desktop needs of a sandbox: its exec path. Our `Sandbox`, or a Harbor
    environment's `exec` where there is nothing of ours to attach to (exec_shell.EnvironmentExec)."""

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
    ) -> ExecOutput: ...


User = str | int | None
"""Who the desktop's commands run as: the agent's user (None: the sandbox's default user, which
the served terminal's attached sandbox already sets to the task's `[agent] user`)."""


async def _exec(
    sandbox: Execs, command: str, env: dict[str, str] | None = None, user: User = None
) -> str:
    """Ensure the display, then run `command` with DISPLAY set; its stdout, or a DesktopError.
    A SandboxError (the sandbox or its engine failed) propagates: whose fault it is, the caller
    decides (the served tool answers it as an error; a GRPO episode classifies it)."""
    done: ExecOutput = await sandbox.exec(
        f"{_ENSURE}\n{command}", env=env, timeout_sec=EXEC_TIMEOUT_SEC, user=user
    )
    if done.exit_code == 96:
        raise DesktopError(MISSING_TOOLS)
    if done.timed_out:
        raise DesktopError(f"the desktop command did not finish in {EXEC_TIMEOUT_SEC:g} s")
    if done.exit_code != 0:
        detail = (done.stdout + done.stderr).strip()[-500:]
        raise DesktopError(f"the desktop command failed (exit {done.exit_code}): {detail}")
    return done.stdout


async def _state(sandbox: Execs, *, png: bool, user: User = None) -> ScreenState:
    script = f"python3 -I -c {shlex.quote(_DESCRIBE)}" + (" png" if png else "")
    out = await _exec(sandbox, script, user=user)
    try:
        return ScreenState.model_validate_json(out.strip().splitlines()[-1] if out.strip() else "")
    except (ValidationError, IndexError) as exc:
        raise DesktopError(f"could not read the screen's state: {str(exc)[:300]}") from exc


class DesktopResult(BaseModel):
    """One desktop tool's answer: a text line, the PNG of a screenshot, whether it is an error.
    The MCP server sends it as a TextContent (+ ImageContent); a GRPO episode reads `model_text`."""

    text: str
    png: str | None = Field(default=None, description="base64 PNG (a screenshot's image)")
    is_error: bool = False

    def model_text(self) -> str:
        """What a text model reads: the blocks as the served loop turns them into text (the MCP
        adapter's blocks through content_text: the image is `[image image/png]`)."""
        blocks = [{"type": "text", "text": self.text}]
        if self.png is not None:
            blocks.append({"type": "image", "mime_type": "image/png"})
        return content_text(blocks)


def error(text: str) -> DesktopResult:
    return DesktopResult(text=f"[error: {text}]", is_error=True)


def screenshot_result(state: ScreenState) -> DesktopResult:
    """A text line the text model reads, then the PNG (when the image could take one)."""
    if state.png is None:
        why = state.error or "no image"
        text = f"[screenshot unavailable ({why}); screen {state.screen}; {state.summary()}]"
        return DesktopResult(text=text)
    try:
        png = base64.b64decode(state.png, validate=True)
    except (binascii.Error, ValueError):
        return error("the screenshot was not valid base64")
    if not png.startswith(b"\x89PNG\r\n\x1a\n"):
        return error("the screenshot was not a PNG")
    width, height = (state.size or [0, 0])[:2]
    text = f"[screenshot {width}x{height} PNG, {len(png) // 1024} KiB; {state.summary()}]"
    return DesktopResult(text=text, png=state.png)


# -- The four tools over a Sandbox: the MCP server's (mcp_servers/desktop.py) and a GRPO episode's
# (training/grpo/desktop_episode.py) one implementation. A DesktopError is the model's answer,
# an error result; a SandboxError propagates.
async def _guarded(work: Awaitable[DesktopResult]) -> DesktopResult:
    try:
        return await work
    except DesktopError as exc:
        return error(str(exc))


async def _after(sandbox: Execs, action: str, user: User) -> DesktopResult:
    state = await _state(sandbox, png=False, user=user)
    return DesktopResult(text=f"[{action}; {state.summary()}]")


async def screenshot(sandbox: Execs, *, user: User = None) -> DesktopResult:
    async def work() -> DesktopResult:
        return screenshot_result(await _state(sandbox, png=True, user=user))

    return await _guarded(work())


async def key(sandbox: Execs, keys: str, *, user: User = None) -> DesktopResult:
    names = keys.split()
    if not names or len(names) > MAX_KEYS or not all(_KEY.match(n) for n in names):
        return error(
            f"keys must be 1 to {MAX_KEYS} xdotool key names (letters, digits, _ and + "
            "for chords), separated by spaces"
        )

    async def work() -> DesktopResult:
        await _exec(sandbox, "xdotool key --delay 40 " + " ".join(names), user=user)
        return await _after(sandbox, f"pressed {' '.join(names)}", user)

    return await _guarded(work())


async def type_text(sandbox: Execs, text: str, *, user: User = None) -> DesktopResult:
    if not text or len(text) > MAX_TYPE_CHARS:
        return error(f"text must be 1 to {MAX_TYPE_CHARS} characters")

    async def work() -> DesktopResult:
        # The text travels in the environment: never part of the command line's syntax.
        await _exec(sandbox, 'xdotool type --delay 20 -- "$AES_TEXT"', {"AES_TEXT": text}, user)
        return await _after(sandbox, f"typed {len(text)} characters", user)

    return await _guarded(work())


async def click(
    sandbox: Execs,
    x: int,
    y: int,
    button: str = "left",
    double: bool = False,
    *,
    user: User = None,
) -> DesktopResult:
    # Checked here, not only by a schema: a GRPO episode's arguments come unchecked from TRL.
    number = {"left": 1, "middle": 2, "right": 3}.get(button)
    if number is None:
        return error("button must be left, middle or right")
    if not (type(x) is int and type(y) is int and type(double) is bool):  # noqa: E721 - not bool
        return error("x and y must be integers and double true or false")
    if not (0 <= x < SCREEN[0] and 0 <= y < SCREEN[1]):
        return error(f"(x, y) must lie on the {SCREEN[0]}x{SCREEN[1]} screen")
    repeat = 2 if double else 1

    async def work() -> DesktopResult:
        move = f"xdotool mousemove --sync {x} {y} click --repeat {repeat} --delay 80 {number}"
        await _exec(sandbox, move, user=user)
        return await _after(
            sandbox, f"clicked {button} at ({x}, {y})" + (" twice" if double else ""), user
        )

    return await _guarded(work())
