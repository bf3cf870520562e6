"""The terminal server's desktop tools (computer use) on a real podman sandbox, through the official
MCP client in memory: the display starts on demand, a Tk app is driven by keys, text and clicks,
screenshots are PNG images with a text line, and the model's text is what content_text renders."""

from __future__ import annotations

import base64

from mcp.shared.memory import create_connected_server_and_client_session
from mcp.types import ImageContent, TextContent

from autoenvscaling.graphs.agent.mcp_tools import open_mcp_tools
from autoenvscaling.mcp_servers.terminal import build_terminal_server
from autoenvscaling.tools.agents.solver_interface import DESKTOP_TOOLS, openai_tools
from autoenvscaling.tools.rollouts.transcripts import content_text

DESKTOP = {"screenshot", "key", "type_text", "click"}

# A Tk window: an entry that writes its text to /tmp/typed on Return, a button at a fixed place
# that writes /tmp/clicked. matchbox maximises the window at (0, 0), so window = screen pixels.
APP = r"""
import tkinter as tk
root = tk.Tk(); root.title("Probe app"); root.geometry("400x300+0+0")
entry = tk.Entry(root); entry.place(x=10, y=10, width=300)
entry.bind("<Return>", lambda e: open("/tmp/typed", "w").write(entry.get()))
tk.Button(root, text="Press", command=lambda: open("/tmp/clicked", "w").write("yes")).place(
    x=100, y=200, width=120, height=40)
entry.focus_set(); root.mainloop()
"""


def connect(server):
    return create_connected_server_and_client_session(server._mcp_server)


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, TextContent))


async def run(session, command, timeout_sec=30):
    result = await session.call_tool("run", {"command": command, "timeout_sec": timeout_sec})
    assert not result.isError, text_of(result)
    return result.structuredContent


async def wait_for(session, command, timeout_sec=15):
    done = await run(
        session,
        f"for i in $(seq 100); do {command} && break; sleep 0.15; done; {command}",
        timeout_sec,
    )
    return done


async def test_desktop_tools_only_when_asked(workspace):
    for desktop, want in ((False, set()), (True, DESKTOP)):
        server = build_terminal_server(ref=workspace.ref, desktop=desktop)
        async with connect(server) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert names & DESKTOP == want and {"run", "read_output", "interrupt"} <= names


async def test_the_bound_schemas_are_the_servers_tools():
    """What the solver binds for a computer-use task (openai_tools(desktop=True)) names and
    describes the tools the server serves, parameter for parameter."""
    server = build_terminal_server(opener=lambda: None, desktop=True)  # type: ignore[arg-type]
    async with connect(server) as session:
        served = {t.name: t for t in (await session.list_tools()).tools if t.name in DESKTOP}
    bound = {s["function"]["name"]: s["function"] for s in openai_tools(desktop=True)}
    assert set(bound) == DESKTOP | {"run", "read_output", "interrupt"}
    assert {s["function"]["name"] for s in openai_tools()} == {"run", "read_output", "interrupt"}
    for name, tool in served.items():
        schema = bound[name]
        assert tool.description == schema["description"] == DESKTOP_TOOLS[name].description
        props = tool.inputSchema.get("properties", {})
        assert set(props) == set(schema["parameters"]["properties"]), name
        assert set(tool.inputSchema.get("required", [])) == set(
            schema["parameters"].get("required", [])
        ), name
        for param, spec in schema["parameters"]["properties"].items():
            assert props[param]["description"] == spec["description"], (name, param)


async def test_screenshot_keys_text_and_click_drive_a_tk_app(workspace):
    server = build_terminal_server(ref=workspace.ref, desktop=True)
    async with connect(server) as session:
        first = await session.call_tool("screenshot", {})  # starts Xvfb :99 and the WM
        assert not first.isError, text_of(first)
        assert text_of(first).startswith("[screenshot 1024x768 PNG")
        image = next(c for c in first.content if isinstance(c, ImageContent))
        assert image.mimeType == "image/png"
        assert base64.b64decode(image.data).startswith(b"\x89PNG\r\n\x1a\n")

        await run(session, f"cat > /tmp/app.py <<'EOF'\n{APP}\nEOF")
        await run(
            session, "DISPLAY=:99 setsid python3 /tmp/app.py >/tmp/app.log 2>&1 < /dev/null &"
        )
        shown = await wait_for(
            session, "DISPLAY=:99 xdotool search --onlyvisible --name '^Probe app$'"
        )
        assert shown["exit_code"] == 0, shown["output"]
        shot = await session.call_tool("screenshot", {})
        assert 'active window: "Probe app"' in text_of(shot)
        assert '"Probe app" 1024x768+0+0' in text_of(shot)

        # Typed literally: shell syntax in the text is never run.
        hostile = "a $(touch /tmp/pwned) `id` \"q\" 'z';"
        typed = await session.call_tool("type_text", {"text": hostile})
        assert not typed.isError and text_of(typed).startswith(f"[typed {len(hostile)} characters;")
        pressed = await session.call_tool("key", {"keys": "Return"})
        assert not pressed.isError, text_of(pressed)
        got = await wait_for(session, "test -s /tmp/typed")
        assert (await run(session, "cat /tmp/typed; ls /tmp/pwned 2>&1"))["output"] == (
            f"{hostile}ls: cannot access '/tmp/pwned': No such file or directory\n"
        ), got

        clicked = await session.call_tool("click", {"x": 160, "y": 220})
        assert not clicked.isError and "clicked left at (160, 220)" in text_of(clicked)
        assert (await wait_for(session, "test -s /tmp/clicked"))["exit_code"] == 0

        # Bad arguments and a missing X tool are errors the model reads, not crashes.
        bad = await session.call_tool("key", {"keys": "Return; rm -rf /"})
        assert bad.isError and "xdotool key names" in text_of(bad)
        off = await session.call_tool("click", {"x": 5000, "y": 1})
        assert off.isError and "1024x768" in text_of(off)
        await run(session, "mv /usr/bin/xdotool /usr/bin/xdotool.off")
        missing = await session.call_tool("screenshot", {})
        assert missing.isError and "xvfb, xdotool" in text_of(missing)
        await run(session, "mv /usr/bin/xdotool.off /usr/bin/xdotool")


async def test_a_screenshot_reaches_the_text_model_as_its_text_line(workspace):
    """Through the LangChain tools the agents bind: the image block becomes `[image image/png]`
    after the screenshot's text line, in the one content_text every path uses."""
    server = build_terminal_server(ref=workspace.ref, desktop=True)
    async with open_mcp_tools({"terminal": server}) as tools:
        shot = next(t for t in tools if t.name == "screenshot")
        message = await shot.ainvoke(
            {"name": "screenshot", "args": {}, "id": "call-1", "type": "tool_call"}
        )
        text = content_text(message.content)
        first, second = text.split("\n")
        assert first.startswith("[screenshot 1024x768 PNG, ") and first.endswith("]")
        assert second == "[image image/png]"
