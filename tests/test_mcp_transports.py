"""The servers run standalone (`python -m autoenvscaling.mcp_servers ...`) over stdio and streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
from contextlib import asynccontextmanager

import httpx
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from pydantic import AnyUrl

from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore

MODULE = ["-m", "autoenvscaling.mcp_servers"]


@asynccontextmanager
async def stdio_session(*args: str, env: dict[str, str] | None = None):
    params = StdioServerParameters(
        command=sys.executable, args=[*MODULE, *args], env={**os.environ, **(env or {})}
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


async def test_filesystem_over_stdio(tmp_path):
    (tmp_path / "hello.txt").write_text("hi there\n")
    async with stdio_session("filesystem", "--root", str(tmp_path)) as session:
        names = {t.name for t in (await session.list_tools()).tools}
        assert names == {"read_file", "write_file", "edit_file", "list_dir", "glob", "grep"}
        read = await session.call_tool("read_file", {"path": "hello.txt"})
        assert read.structuredContent["content"] == "hi there\n"
        refused = await session.call_tool("read_file", {"path": "../../etc/passwd"})
        assert refused.isError and "[traversal]" in refused.content[0].text


async def test_rollouts_over_stdio_with_db_from_env(tmp_path):
    store = RolloutStore(tmp_path / "r.db")
    store.record_attempt(
        Attempt(id="a1", task_id="t", outcome="failed", reward=0.0),
        [Step(index=0, tool_output="segfault here", exit_code=139)],
    )
    async with stdio_session(
        "rollouts", env={"AUTOENVSCALING_ROLLOUT_DB": str(tmp_path / "r.db")}
    ) as s:
        summary = await s.call_tool("rollout_summary", {})
        assert summary.structuredContent["attempts"] == 1
        resource = await s.read_resource(AnyUrl("rollout://a1"))
        assert "segfault here" in resource.contents[0].text


async def test_terminal_over_stdio_attached_by_ref(workspace):
    ref = workspace.ref.model_dump_json()
    async with stdio_session("terminal", "--ref", ref) as session:
        await session.call_tool("run", {"command": "cd /opt && export K=v"})
        result = await session.call_tool("run", {"command": "pwd; echo $K"})
        assert result.structuredContent["output"] == "/opt\nv\n"
    async with stdio_session("terminal", env={"AUTOENVSCALING_SANDBOX_REF": ref}) as session:
        result = await session.call_tool("run", {"command": "cd /srv && pwd"})
        assert result.structuredContent["output"] == "/srv\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@asynccontextmanager
async def http_server(*args: str):
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, *MODULE, *args, "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        for _ in range(200):
            if proc.poll() is not None:
                raise AssertionError(
                    proc.stderr.read().decode() if proc.stderr else "server exited"
                )
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                await asyncio.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@asynccontextmanager
async def http_session(url: str):
    async with (
        streamable_http_client(url) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_http_terminal_sessions_each_get_a_shell(workspace):
    ref = workspace.ref.model_dump_json()
    async with (
        http_server("terminal", "--ref", ref) as url,
        http_session(url) as one,
        http_session(url) as two,
    ):
        await one.call_tool("run", {"command": "cd /tmp"})
        first = await one.call_tool("run", {"command": "pwd"})
        second = await two.call_tool("run", {"command": "pwd"})
        assert first.structuredContent["output"] == "/tmp\n"
        assert second.structuredContent["output"] == "/workspace\n"


async def test_http_filesystem_binds_loopback(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    async with http_server("filesystem", "--root", str(tmp_path)) as url:
        async with http_session(url) as session:
            listed = await session.call_tool("list_dir", {})
            assert [e["name"] for e in listed.structuredContent["entries"]] == ["a.txt"]
        # DNS-rebinding guard: a foreign Host header is refused.
        async with httpx.AsyncClient() as client:
            response = await client.post(url, headers={"Host": "evil.example"}, json={})
            assert response.status_code in (403, 421)
