"""The container engines side by side: shell round trip and per-trial overhead.

1. Persistent-shell round trip: `run('true')`, and `run('sleep 0.05')` minus its 50 ms, median
   over many calls; the API `exec('true')` (a fresh process per command) for comparison.
2. Per-trial overhead over the seed pool: each task's own scripts (solve.sh then test.sh for
   the oracle, test.sh alone for nop), timed inside a sandbox of its built image, against the
   whole Harbor trial (oracle and nop, images already built, one trial at a time so the numbers
   are not contention). Overhead = trial time - script time.

    .venv/bin/python benchmarks/bench_engine.py [--engines podman docker] [--tasks tasks/seed]
        [--limit 6] [--calls 100] [--json out.json]

docker is measured where a daemon answers (DOCKER_HOST) and has the base image
(`python -m autoenvscaling.tools.sandbox.bases --engine docker`); else it says why not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoenvscaling.tools.sandbox.base import Backend
from autoenvscaling.tools.sandbox.bases import require_base
from autoenvscaling.tools.sandbox.container import ContainerSandbox, start_workspace
from autoenvscaling.tools.sandbox.images import build_image
from autoenvscaling.tools.tasks.format import HarborTask, load_task
from autoenvscaling.tools.trials.trial import run_trial

os.environ.setdefault("HARBOR_TELEMETRY", "0")
REPO = Path(__file__).resolve().parents[1]
console = Console()


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


async def shell_round_trip(backend: Backend, calls: int) -> dict[str, float]:
    box = await start_workspace(backend=backend)
    try:
        shell = await box.open_shell()
        for _ in range(5):  # warm up
            await shell.run("true")
        true_s, sleep_s, exec_s = [], [], []
        for _ in range(calls):
            t = time.perf_counter()
            await shell.run("true")
            true_s.append(time.perf_counter() - t)
            t = time.perf_counter()
            await shell.run("sleep 0.05")
            sleep_s.append(time.perf_counter() - t - 0.05)
        for _ in range(max(calls // 5, 5)):
            t = time.perf_counter()
            await box.exec("true")
            exec_s.append(time.perf_counter() - t)
        return {
            "shell_true": statistics.median(true_s),
            "shell_sleep_minus_50ms": statistics.median(sleep_s),
            "exec_true": statistics.median(exec_s),
        }
    finally:
        await box.close()


async def _timed(box: ContainerSandbox, command: str, env: dict[str, str]) -> float:
    t = time.perf_counter()
    result = await box.exec(command, env=env, timeout_sec=900)
    if result.exit_code is None:
        raise RuntimeError(f"{command} timed out")
    return time.perf_counter() - t


async def script_time(backend: Backend, task: HarborTask) -> dict[str, float]:
    """The task's own scripts in a fresh sandbox of its image: what any harness must spend."""
    env = task.config.environment
    from harbor.models.task.task import Task

    name = Task(task_dir=task.root).short_name  # what Harbor's trials build under: one cache
    image = await build_image(task.environment_dir, backend=backend, task_name=name)
    times: dict[str, float] = {}
    for agent in ("oracle", "nop"):
        box = await ContainerSandbox.start(image.tag, backend=backend, workdir=env.workdir)
        try:
            await box.exec("mkdir -p /logs/verifier /logs/agent")
            spent = 0.0
            if agent == "oracle":
                assert task.solution_dir is not None
                await box.upload(task.solution_dir, "/solution")
                spent += await _timed(
                    box, "bash /solution/solve.sh", dict(task.config.solution.env)
                )
            await box.upload(task.tests_dir, "/tests")
            spent += await _timed(
                box,
                "bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1",
                dict(task.config.verifier.env),
            )
            times[agent] = spent
        finally:
            await box.close()
    return times


async def trial_overhead(backend: Backend, tasks: list[Path]) -> dict[str, dict[str, float]]:
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="aes-bench-") as tmp:
        for task_dir in tasks:
            task = load_task(task_dir)
            scripts = await script_time(backend, task)  # also builds the image once
            row: dict[str, float] = {}
            for agent in ("oracle", "nop"):
                outcome = await run_trial(
                    task_dir, agent=agent, backend=backend, trials_dir=Path(tmp) / agent
                )
                if outcome.error:
                    raise RuntimeError(f"{task_dir.name}/{agent}: {outcome.error}")
                row[f"{agent}_trial"] = outcome.duration_sec
                row[f"{agent}_script"] = scripts[agent]
            rows[task_dir.name] = row
            console.print(
                f"  {backend} {task_dir.name}: oracle {row['oracle_trial']:.2f} s "
                f"(scripts {row['oracle_script']:.2f}), nop {row['nop_trial']:.2f} s "
                f"(scripts {row['nop_script']:.2f})"
            )
    return rows


def usable(backend: Backend) -> str | None:
    try:
        require_base(backend)
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        return str(exc)[:200]
    return None


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", nargs="+", default=["podman", "docker"])
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks" / "seed")
    parser.add_argument("--limit", type=int, default=0, help="only the first N tasks (0: all)")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--no-trials", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    tasks = sorted(p for p in args.tasks.iterdir() if (p / "task.toml").exists())
    tasks = tasks[: args.limit] if args.limit else tasks
    results: dict[str, dict] = {}
    for backend in args.engines:
        if why := usable(backend):
            console.print(f"[yellow]{backend}: not measured: {why}")
            results[backend] = {"skipped": why}
            continue
        shell = await shell_round_trip(backend, args.calls)
        results[backend] = {"shell": shell}
        console.print(
            f"  {backend} shell: " + ", ".join(f"{k} {ms(v)} ms" for k, v in shell.items())
        )
        if not args.no_trials:
            results[backend]["trials"] = await trial_overhead(backend, tasks)

    table = Table(title=f"shell round trip, median of {args.calls} calls (ms)")
    for col in ("engine", "run('true')", "run('sleep 0.05') - 50 ms", "exec('true')"):
        table.add_column(col, justify="right")
    for backend, res in results.items():
        if "shell" in res:
            s = res["shell"]
            table.add_row(
                backend,
                ms(s["shell_true"]),
                ms(s["shell_sleep_minus_50ms"]),
                ms(s["exec_true"]),
            )
    console.print(table)
    if not args.no_trials:
        table = Table(title=f"Harbor trials over {len(tasks)} tasks, one at a time (s)")
        for col in (
            "engine",
            "agent",
            "scripts total",
            "trials total",
            "overhead / trial (median)",
            "trials / scripts",
        ):
            table.add_column(col, justify="right")
        for backend, res in results.items():
            rows = res.get("trials") or {}
            if not rows:
                continue
            for agent in ("oracle", "nop"):
                scripts = sum(r[f"{agent}_script"] for r in rows.values())
                trials = sum(r[f"{agent}_trial"] for r in rows.values())
                overhead = statistics.median(
                    r[f"{agent}_trial"] - r[f"{agent}_script"] for r in rows.values()
                )
                table.add_row(
                    backend,
                    agent,
                    f"{scripts:.1f}",
                    f"{trials:.1f}",
                    f"{overhead:.2f}",
                    f"{trials / scripts:.1f}x",
                )
        console.print(table)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
