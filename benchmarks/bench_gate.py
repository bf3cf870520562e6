"""The admission gate (up to calibrate) over the seed pool: its wall time against

1. the floor: the tasks' own scripts (solve.sh + test.sh for the oracle, test.sh for nop), each
   timed inside a podman sandbox of the built image, summed over the pool;
2. `harbor run` (oracle, then nop) over the same pool with Harbor's docker backend, where a
   Docker engine with compose v2 is reachable (else it says why not), and with our podman
   environment plugged into `harbor run`, for Harbor's own orchestration cost.

    .venv/bin/python benchmarks/bench_gate.py [--tasks tasks/seed] [-n 2] [--trials 4] [--json OUT]

Needs the podman engine and the base image (`make bases`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from autoenvscaling.graphs.validation.builder import validate_batch
from autoenvscaling.tools.gate import STAGES, GateConfig, Verdict
from autoenvscaling.tools.gate.anti_cheat.stage import executed_image_files
from autoenvscaling.tools.sandbox.container import ContainerSandbox
from autoenvscaling.tools.sandbox.images import build_image
from autoenvscaling.tools.tasks.format import HarborTask, load_task

os.environ.setdefault("HARBOR_TELEMETRY", "0")
REPO = Path(__file__).resolve().parents[1]
PODMAN_ENV = "autoenvscaling.tools.sandbox.harbor_env:HardenedPodmanEnvironment"
console = Console()


async def _timed(sandbox: ContainerSandbox, command: str, env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = await sandbox.exec(command, env=env, timeout_sec=900)
    if result.exit_code is None:
        raise RuntimeError(f"{command} timed out")
    return time.perf_counter() - started


async def script_floor(task: HarborTask) -> dict[str, float]:
    """solve.sh, test.sh after it, and test.sh on the initial state, each in a fresh sandbox
    of the built image: what any harness must spend at least."""
    env = task.config.environment
    image = await build_image(task.environment_dir, docker_image=env.docker_image)
    times: dict[str, float] = {}
    for phase in ("oracle", "nop"):
        sandbox = await ContainerSandbox.start(image.tag, workdir=env.workdir)
        try:
            await sandbox.exec("mkdir -p /logs/verifier /logs/agent")
            if phase == "oracle":
                assert task.solution_dir is not None
                await sandbox.upload(task.solution_dir, "/solution")
                times["solve"] = await _timed(
                    sandbox, "bash /solution/solve.sh", dict(task.config.solution.env)
                )
            await sandbox.upload(task.tests_dir, "/tests")
            times[f"verify_{phase}"] = await _timed(
                sandbox,
                "bash /tests/test.sh > /logs/verifier/test-stdout.txt 2>&1",
                dict(task.config.verifier.env),
            )
        finally:
            await sandbox.close()
    return times


def harbor_run(pool: Path, env: list[str], concurrency: int, jobs: Path) -> tuple[float, str]:
    """`harbor run` with the oracle, then the nop agent, over the pool: (seconds, note)."""
    started = time.perf_counter()
    for agent in ("oracle", "nop"):
        done = subprocess.run(
            [
                str(Path(sys.executable).with_name("harbor")),
                "run",
                "-p",
                str(pool),
                "-a",
                agent,
                *env,
                "-n",
                str(concurrency),
                "-o",
                str(jobs),
                "-y",
                "-q",
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            return time.perf_counter() - started, f"failed: {(done.stderr or done.stdout)[-300:]}"
    return time.perf_counter() - started, "ok"


def docker_compose_missing() -> str | None:
    """Why Harbor's docker backend cannot run here, or None when it can."""
    if not shutil.which("docker"):
        return "no docker CLI on PATH"
    compose = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, check=False
    )
    if compose.returncode != 0:
        return "the docker CLI has no compose v2 plugin (`docker compose version` fails)"
    info = subprocess.run(["docker", "info"], capture_output=True, text=True, check=False)
    if info.returncode != 0:
        return "no Docker engine is reachable (`docker info` fails)"
    return None


def harbor_pool(tasks: list[Path], into: Path) -> Path:
    """A dataset folder holding only the task folders (the seed pool also has a README)."""
    into.mkdir(parents=True, exist_ok=True)
    for task in tasks:
        (into / task.name).symlink_to(task.resolve())
    return into


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks" / "seed")
    parser.add_argument("-n", "--concurrency", type=int, default=2, help="candidates at once")
    parser.add_argument("--trials", type=int, default=4, help="trials in flight at once")
    parser.add_argument("--no-harbor", action="store_true", help="skip the `harbor run` rows")
    parser.add_argument("--json", type=Path, help="also write the timings here (run_all)")
    args = parser.parse_args()
    load_start = round(os.getloadavg()[0], 1)
    tasks = sorted(p for p in args.tasks.iterdir() if (p / "task.toml").exists())
    console.print(f"{len(tasks)} tasks from {args.tasks}; {os.cpu_count()} cores")

    for task in tasks:  # builds are cached by content; keep them out of every timing below
        env = load_task(task).config.environment
        await build_image(task / "environment", docker_image=env.docker_image)

    floors: dict[str, dict[str, float]] = {}
    for task in tasks:
        floors[task.name] = await script_floor(load_task(task))
    floor_total = sum(sum(t.values()) for t in floors.values())

    config = GateConfig(
        skip=["calibrate"],
        pool_dir=args.tasks,
        concurrency=args.concurrency,
        trial_concurrency=args.trials,
    )
    started = time.perf_counter()
    verdicts: list[Verdict] = await validate_batch(tasks, config)
    gate_wall = time.perf_counter() - started
    admitted = sum(v.admitted for v in verdicts)

    stages = Table(
        "stage",
        "mean s / task",
        "max s",
        title="gate stage times per task (include waiting for a trial slot)",
    )
    for stage in STAGES:
        times = [v.timings[stage] for v in verdicts if stage in v.timings]
        if times:
            stages.add_row(stage, f"{statistics.mean(times):.2f}", f"{max(times):.2f}")
    console.print(stages)

    summary = Table("what", "wall s", "vs script floor", "note", title="seed pool")
    summary.add_row(
        "script floor (solve + 2x test.sh, serial sum)",
        f"{floor_total:.1f}",
        "1.0x",
        "inside podman, images prebuilt",
    )
    # The scripts of the gate's own trials: oracle, repeat and leak probe run solve + test.sh;
    # nop, the forge probe and (where the tests run image files) the stub probe run test.sh.
    gate_scripts = sum(
        (t["solve"] + t["verify_oracle"]) * (2 + config.repeat)
        + t["verify_nop"] * (2 + bool(executed_image_files(args.tasks / name)))
        for name, t in floors.items()
    )
    summary.add_row(
        "the gate's own trials' scripts (serial sum)",
        f"{gate_scripts:.1f}",
        f"{gate_scripts / floor_total:.1f}x",
        "what the gate's trials must run",
    )
    summary.add_row(
        f"gate up to calibrate (-n {args.concurrency}, {args.trials} trials)",
        f"{gate_wall:.1f}",
        f"{gate_wall / floor_total:.1f}x",
        f"{admitted}/{len(verdicts)} admitted; {1 + 1 + config.repeat + 2}+ trials per task",
    )
    timings: dict[str, object] = {
        "tasks": len(tasks),
        "admitted": admitted,
        "floor_s": round(floor_total, 1),
        "gate_scripts_s": round(gate_scripts, 1),
        "gate_s": round(gate_wall, 1),
        "concurrency": args.concurrency,
        "trials_in_flight": args.trials,
    }
    if not args.no_harbor:
        with tempfile.TemporaryDirectory(prefix="aes-bench-gate-") as tmp:
            pool = harbor_pool(tasks, Path(tmp) / "pool")
            seconds, note = harbor_run(pool, ["-e", PODMAN_ENV], args.trials, Path(tmp) / "jobs")
            timings["harbor_podman_s"] = round(seconds, 1) if note == "ok" else None
            timings["harbor_podman_note"] = note
            summary.add_row(
                "harbor run oracle+nop, our podman env",
                f"{seconds:.1f}",
                f"{seconds / floor_total:.1f}x",
                f"{note}; 2 trials per task",
            )
            why_not = docker_compose_missing()
            if why_not is None:
                seconds, note = harbor_run(
                    pool, ["-e", "docker"], args.trials, Path(tmp) / "jobs-docker"
                )
                summary.add_row(
                    "harbor run oracle+nop, Harbor's docker backend",
                    f"{seconds:.1f}",
                    f"{seconds / floor_total:.1f}x",
                    note,
                )
            else:
                summary.add_row(
                    "harbor run oracle+nop, Harbor's docker backend",
                    "-",
                    "-",
                    f"not run: {why_not}",
                )
    console.print(summary)
    if args.json:
        timings |= {"load_start": load_start, "load_end": round(os.getloadavg()[0], 1)}
        args.json.write_text(json.dumps(timings, indent=2))
    rejected = [v.summary() for v in verdicts if not v.admitted]
    if rejected:
        console.print("[red]rejected seed tasks:[/]\n" + "\n".join(rejected))


if __name__ == "__main__":
    asyncio.run(main())
