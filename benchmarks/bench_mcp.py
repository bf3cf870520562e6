"""Terminal `run("true")` round trip: direct persistent shell vs MCP (in memory, stdio, HTTP).

    .venv/bin/python benchmarks/bench_mcp.py [--calls 200] [--local]

Needs the podman engine and the base image (`make bases`); `--local` uses a plain local bash
instead (no sandbox) to measure the protocol overhead alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.memory import create_connected_server_and_client_session
from rich.console import Console
from rich.table import Table

from autoenvscaling.graphs.agent.mcp_tools import open_mcp_tools
from autoenvscaling.mcp_servers.filesystem import build_filesystem_server
from autoenvscaling.mcp_servers.terminal import build_terminal_server
from autoenvscaling.tools.files.rooted import RootedFs
from autoenvscaling.tools.sandbox.shell import PersistentShell

MODULE = [sys.executable, "-m", "autoenvscaling.mcp_servers"]


async def measure(call: Callable[[], Awaitable[object]], calls: int) -> list[float]:
    for _ in range(min(10, calls)):  # warm up
        await call()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        await call()
        times.append((time.perf_counter() - start) * 1000)
    return times


@asynccontextmanager
async def stdio_session(args: list[str]) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=args[0], args=args[1:], env=dict(os.environ))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(args: list[str]) -> AsyncIterator[ClientSession]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [*args, "--transport", "http", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(400):
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                    break
            except OSError:
                await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        async with streamable_http_client(url) as (read, write, _), ClientSession(read, write) as s:
            await s.initialize()
            yield s
    finally:
        proc.terminate()
        proc.wait(timeout=20)


async def local_bash() -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "bash",
        "--noprofile",
        "--norc",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument(
        "--local", action="store_true", help="local bash instead of a podman sandbox"
    )
    parser.add_argument("--json", type=Path, help="also write the p50s here (benchmarks/run_all)")
    args = parser.parse_args()
    n = args.calls
    results: dict[str, list[float]] = {}
    run_true = {"command": "true", "timeout_sec": 30}

    sandbox = None
    if args.local:

        @asynccontextmanager
        async def opener() -> AsyncIterator[PersistentShell]:
            shell = await PersistentShell.start(local_bash)
            try:
                yield shell
            finally:
                await shell.close()

        terminal = build_terminal_server(opener)
        cli_args: list[str] | None = None
        direct = await PersistentShell.start(local_bash)
    else:
        from autoenvscaling.tools.sandbox.container import start_workspace

        sandbox = await start_workspace()
        terminal = build_terminal_server(ref=sandbox.ref)
        cli_args = [*MODULE, "terminal", "--ref", sandbox.ref.model_dump_json()]
        direct = await sandbox.open_shell()
    try:
        results["direct PersistentShell.run"] = await measure(lambda: direct.run("true"), n)
        async with create_connected_server_and_client_session(terminal._mcp_server) as session:
            results["MCP in-memory call_tool"] = await measure(
                lambda: session.call_tool("run", run_true), n
            )
        async with open_mcp_tools({"terminal": terminal}) as tools:
            run = next(t for t in tools if t.name == "run")
            results["langchain tool over in-memory MCP"] = await measure(
                lambda: run.ainvoke(run_true), n
            )
        if cli_args:
            async with stdio_session(cli_args) as session:
                results["MCP stdio call_tool"] = await measure(
                    lambda: session.call_tool("run", run_true), n
                )
            async with http_session(cli_args) as session:
                results["MCP streamable HTTP call_tool"] = await measure(
                    lambda: session.call_tool("run", run_true), n
                )

        with tempfile.TemporaryDirectory() as tmp:
            with open(os.path.join(tmp, "f.txt"), "w") as handle:
                handle.write("line\n" * 100)
            fs = RootedFs(tmp)
            results["filesystem: direct RootedFs.read"] = await measure(
                lambda: asyncio.to_thread(fs.read, "f.txt"), n
            )
            server = build_filesystem_server(tmp)
            async with create_connected_server_and_client_session(server._mcp_server) as session:
                results["filesystem: MCP in-memory read_file"] = await measure(
                    lambda: session.call_tool("read_file", {"path": "f.txt"}), n
                )
    finally:
        await direct.close()
        if sandbox is not None:
            await sandbox.close()

    base = statistics.median(results["direct PersistentShell.run"])
    table = Table(
        "path",
        "p50 ms",
        "p95 ms",
        "mean ms",
        "p50 overhead vs direct shell",
        title=f"terminal run('true'), {n} calls ({'local bash' if args.local else 'podman'})",
    )
    for name, times in results.items():
        p50 = statistics.median(times)
        p95 = statistics.quantiles(times, n=20)[18]
        overhead = "" if name.startswith("filesystem") else f"+{p50 - base:.2f} ms"
        table.add_row(name, f"{p50:.2f}", f"{p95:.2f}", f"{statistics.fmean(times):.2f}", overhead)
    Console().print(table)
    if args.json:
        rows = {name: round(statistics.median(times), 3) for name, times in results.items()}
        args.json.write_text(json.dumps({"p50_ms": rows, "direct_ms": round(base, 3)}, indent=2))


if __name__ == "__main__":
    asyncio.run(main())
