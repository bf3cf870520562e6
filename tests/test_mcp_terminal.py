"""The terminal MCP server over real podman sandboxes, through a real MCP client (in memory): attached
to a live sandbox of ours, and over a Harbor environment's `exec` alone (`exec_shells`, as on any
`harbor:<type>`), with the same observable behaviour."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from autoenvscaling.mcp_servers.terminal import (
    attached_shells,
    build_terminal_server,
    exec_shells,
    pooled_terminal_server,
    workspace_shells,
)
from autoenvscaling.tools.agents.solver_interface import SHELL_BUSY
from autoenvscaling.tools.sandbox import SandboxLimits
from autoenvscaling.tools.sandbox.cleanup import LABEL, OWNER_LABEL
from autoenvscaling.tools.sandbox.engine import client


def connect(server):
    return create_connected_server_and_client_session(server._mcp_server)


async def run(session, command, timeout_sec=30):
    result = await session.call_tool("run", {"command": command, "timeout_sec": timeout_sec})
    assert not result.isError, result.content[0].text
    return result.structuredContent


GOOD_TASK = Path(__file__).resolve().parent / "fixtures" / "good_task"


@pytest.fixture(params=["attached", "exec"])
async def terminal(request, engine_ready):
    """`terminal(**options)` builds a terminal server: attached to a workspace sandbox, or over a
    real Harbor environment's `exec` (ours, used only through BaseEnvironment's methods)."""
    if request.param == "attached":
        from autoenvscaling.tools.sandbox.container import start_workspace

        workspace = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64))
        try:
            yield lambda **options: build_terminal_server(ref=workspace.ref, **options)
        finally:
            await workspace.close()
        return
    from autoenvscaling.training.grpo.sandboxes import task_starter

    live = await task_starter("podman")(GOOD_TASK)
    try:
        yield lambda **options: build_terminal_server(exec_shells(live.environment), **options)
    finally:
        await live.close()


async def test_state_persists_across_run_calls(terminal):
    server = terminal()
    async with connect(server) as client:
        first = await run(client, "cd /tmp && export GREETING=hello && mkdir -p proj")
        assert first["exit_code"] == 0 and not first["running"]
        second = await run(client, "pwd; echo $GREETING; ls -d proj")
        assert second["output"] == "/tmp\nhello\nproj\n"
        failing = await run(client, "echo oops >&2; false")
        assert failing["exit_code"] == 1 and failing["output"] == "oops\n"
        assert failing["duration_sec"] >= 0


async def test_output_is_capped_and_marked(terminal):
    server = terminal(output_cap=2000)
    async with connect(server) as client:
        result = await run(client, "head -c 100000 /dev/zero | tr '\\0' x; echo; echo END")
        assert result["truncated"] and result["output_bytes"] == 100005
        assert "bytes truncated" in result["output"] and result["output"].endswith("END\n")
        assert len(result["output"]) < 2100


async def test_long_command_read_output_and_interrupt(terminal):
    server = terminal()
    async with connect(server) as client:
        await run(client, "cd /etc")
        started = await run(client, "echo begin; sleep 1; echo end", timeout_sec=0.2)
        assert started["running"] and started["exit_code"] is None
        assert started["output"] == "begin\n" and "read_output" in started["note"]
        busy = await client.call_tool("run", {"command": "true"})
        assert busy.isError and busy.content[0].text == SHELL_BUSY  # exactly, as GRPO's episode
        rest = (await client.call_tool("read_output", {"timeout_sec": 10})).structuredContent
        assert rest["exit_code"] == 0 and rest["output"] == "end\n" and not rest["running"]

        await run(client, "sleep 60", timeout_sec=0.2)
        stopped = (await client.call_tool("interrupt", {})).structuredContent
        assert not stopped["running"] and stopped["exit_code"] != 0
        assert (await run(client, "pwd"))["output"] == "/etc\n"  # the shell survived
        idle = (await client.call_tool("interrupt", {})).structuredContent
        assert idle["note"] == "no command is running"


async def test_each_session_gets_its_own_shell_in_the_shared_sandbox(workspace):
    server = build_terminal_server(attached_shells(workspace.ref))
    async with connect(server) as one, connect(server) as two:
        await run(one, "cd /tmp && echo shared > /tmp/note")
        assert (await run(two, "pwd"))["output"] == "/workspace\n"  # cwd is per session
        assert (await run(two, "cat /tmp/note"))["output"] == "shared\n"  # files are shared
    # Closing the sessions closed their shells, not the sandbox the ref points at.
    assert await workspace.is_alive()


async def test_a_pooled_server_serves_each_holder_its_own_sandbox(workspace):
    """Solver episodes take their terminal server from a pool: a server two episodes held in
    turn reaches each one's sandbox, never the earlier holder's; episodes at once hold
    different servers; a server nobody holds refuses a session."""
    from autoenvscaling.tools.sandbox.container import start_workspace

    other = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64))
    try:
        await run_in(workspace, "echo first > /tmp/whose")
        await run_in(other, "echo second > /tmp/whose")
        with pooled_terminal_server(attached_shells(workspace.ref)) as first:
            async with connect(first) as session:
                assert (await run(session, "cat /tmp/whose"))["output"] == "first\n"
                # Attack: leave a command running (and printing) for the server's next holder.
                left = await run(session, "sleep 2; echo LEFT-BEHIND; sleep 30", timeout_sec=1)
                assert left["running"]
            with pooled_terminal_server(attached_shells(other.ref)) as meanwhile:
                assert meanwhile is not first  # held at once: two servers
        with pooled_terminal_server(attached_shells(other.ref)) as again:
            assert again in (first, meanwhile)  # reused, not built again
            async with connect(again) as session:
                waited = (
                    await session.call_tool("read_output", {"timeout_sec": 3})
                ).structuredContent
                assert not waited["running"] and "LEFT-BEHIND" not in waited["output"], waited
                assert (await run(session, "cat /tmp/whose"))["output"] == "second\n"
        with pytest.raises(BaseExceptionGroup) as refused:
            async with connect(again) as session:
                await session.call_tool("run", {"command": "true"})
        assert refused.group_contains(RuntimeError, match="nobody held it")
    finally:
        await other.close()


async def run_in(sandbox, command: str) -> None:
    shell = await sandbox.open_shell()
    assert (await shell.run(command, 30)).exit_code == 0


def mine(api) -> list[dict]:
    """Containers this test process owns (other tests and helpers share the engine)."""
    return [
        c
        for c in api.containers(all=True, filters={"label": f"{LABEL}=1"})
        if f":{os.getpid()}:" in c["Labels"].get(OWNER_LABEL, "")
    ]


async def test_own_workspace_per_session_is_started_lazily_and_removed(engine_ready):
    api = client(engine_ready).api
    before = {c["Id"] for c in mine(api)}
    server = build_terminal_server(workspace_shells(limits=SandboxLimits(memory_mb=256, pids=64)))
    async with connect(server) as session:
        tools = {t.name for t in (await session.list_tools()).tools}
        assert tools == {"run", "read_output", "interrupt"}
        assert {c["Id"] for c in mine(api)} == before  # listing tools started no sandbox
        result = await run(session, "pwd; echo data > file; cat file")
        assert result["output"].startswith("/workspace\ndata\n")
        assert len({c["Id"] for c in mine(api)} - before) == 1
    assert {c["Id"] for c in mine(api)} - before == set()  # the session's sandbox was removed
