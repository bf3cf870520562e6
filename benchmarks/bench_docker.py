"""Docker backend costs, as ratios.

1. Per-command round trip of `true`: the persistent shell (one long-lived `docker exec -i` bash)
   vs a fresh exec per command (the SDK's exec API, and the `docker exec` CLI).
2. Whole Harbor trial time, bwrap vs docker, over the seed pool (images built beforehand, so
   the trials compare start + agent + verifier + teardown, not builds).

    DOCKER_HOST=unix:///path/to/docker.sock .venv/bin/python benchmarks/bench_docker.py
    ... --calls 200 --tasks 0 --agent oracle      # 0 tasks: the whole seed pool

Needs a Docker engine (start one as .ci/docker-tier does) and, for the trial part, the bwrap
backend (root, bubblewrap, the base rootfs).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoenvscaling.tools.sandbox.docker import start_workspace
from autoenvscaling.tools.trials import run_trial

SEED = Path(__file__).resolve().parents[1] / "tasks" / "seed"


async def timed(calls: int, one: Callable[[], Awaitable[object]]) -> list[float]:
    await one()  # warm-up
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await one()
        samples.append(time.perf_counter() - started)
    return samples


async def round_trips(calls: int) -> dict[str, list[float]]:
    sandbox = await start_workspace()
    try:
        shell = await sandbox.open_shell()

        async def via_shell() -> None:
            assert (await shell.run("true")).exit_code == 0

        async def via_sdk_exec() -> None:
            assert (await sandbox.exec("true")).exit_code == 0

        cli = shutil.which("docker") or "docker"

        async def via_cli_exec() -> None:
            proc = await asyncio.create_subprocess_exec(
                cli,
                "exec",
                sandbox.container_id,
                "true",
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            assert await proc.wait() == 0

        return {
            "persistent shell": await timed(calls, via_shell),
            "exec (SDK)": await timed(calls, via_sdk_exec),
            "docker exec (CLI)": await timed(calls, via_cli_exec),
        }
    finally:
        await sandbox.close()


async def trials(tasks: list[Path], agent: str) -> dict[str, dict[str, float]]:
    times: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for backend in ("bwrap", "docker"):
            for task in tasks:  # build (or find) the image first: trials compare runs only
                await run_trial(task, agent="nop", backend=backend, trials_dir=Path(tmp))
            for task in tasks:
                outcome = await run_trial(task, agent=agent, backend=backend, trials_dir=Path(tmp))
                if outcome.error:
                    raise SystemExit(f"{task.name} on {backend}: {outcome.error}")
                times.setdefault(task.name, {})[backend] = outcome.duration_sec
    return times


def ms(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1000:.2f}"


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=100, help="round trips per method")
    parser.add_argument("--tasks", type=int, default=0, help="seed tasks to time (0: all)")
    parser.add_argument("--agent", default="oracle", help="oracle or nop")
    parser.add_argument("--skip-trials", action="store_true", help="round trips only")
    args = parser.parse_args()
    os.environ.setdefault("HARBOR_TELEMETRY", "0")
    console = Console()

    rt = await round_trips(args.calls)
    base = statistics.median(rt["persistent shell"])
    table = Table(
        "method",
        "median ms",
        "p90 ms",
        "ratio to the shell",
        title=f"round trip of `true`, {args.calls} calls each",
    )
    for name, samples in rt.items():
        p90 = sorted(samples)[int(len(samples) * 0.9) - 1]
        table.add_row(
            name, ms(samples), f"{p90 * 1000:.2f}", f"{statistics.median(samples) / base:.0f}x"
        )
    console.print(table)

    if not args.skip_trials:
        tasks = sorted(p for p in SEED.iterdir() if (p / "task.toml").exists())
        tasks = tasks[: args.tasks] if args.tasks else tasks
        times = await trials(tasks, args.agent)
        table = Table(
            "task",
            "bwrap s",
            "docker s",
            "docker / bwrap",
            title=f"whole {args.agent} trial, images prebuilt, one at a time",
        )
        for name, t in times.items():
            table.add_row(
                name, f"{t['bwrap']:.2f}", f"{t['docker']:.2f}", f"{t['docker'] / t['bwrap']:.2f}"
            )
        total_b = sum(t["bwrap"] for t in times.values())
        total_d = sum(t["docker"] for t in times.values())
        table.add_row("[b]all", f"{total_b:.1f}", f"{total_d:.1f}", f"[b]{total_d / total_b:.2f}")
        console.print(table)

    flags = " ".join(sys.argv[1:])
    console.print(
        f"reproduce: DOCKER_HOST={os.environ.get('DOCKER_HOST', '')} "
        f".venv/bin/python benchmarks/bench_docker.py {flags}".rstrip()
    )


if __name__ == "__main__":
    asyncio.run(main())
