"""Command round trip: persistent shell vs spawning `bash -c true` vs a fresh bwrap sandbox spawn.

    .venv/bin/python benchmarks/bench_shell.py [--runs 200]

Prints medians over --runs runs and the ratios the issue asks for.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import time

from autoenvscaling.tools.sandbox.bwrap import start_workspace
from autoenvscaling.tools.sandbox.rootfs import ensure_base_rootfs


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def main(runs: int) -> None:
    rootfs = ensure_base_rootfs()
    sandbox = await start_workspace()
    shell = await sandbox.open_shell()
    timings: dict[str, list[float]] = {"shell": [], "exec": [], "bash": [], "bwrap": []}
    for _ in range(runs):
        t = time.perf_counter()
        await shell.run("true")
        timings["shell"].append(time.perf_counter() - t)
        t = time.perf_counter()
        await sandbox.exec("true")
        timings["exec"].append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(["bash", "-c", "true"], check=True)
        timings["bash"].append(time.perf_counter() - t)
        t = time.perf_counter()
        subprocess.run(
            [
                "bwrap",
                "--ro-bind",
                str(rootfs),
                "/",
                "--dev",
                "/dev",
                "--proc",
                "/proc",
                "--unshare-pid",
                "--unshare-net",
                "--die-with-parent",
                "--",
                "true",
            ],
            check=True,
        )
        timings["bwrap"].append(time.perf_counter() - t)
    await sandbox.close()
    medians = {k: _median_ms(v) for k, v in timings.items()}
    print(f"median over {runs} runs (ms):")
    labels = {
        "shell": "persistent shell run('true')",
        "exec": "sandbox.exec('true') (nsenter)",
        "bash": "spawn bash -c true (host)",
        "bwrap": "fresh bwrap spawn of true",
    }
    for key, label in labels.items():
        print(f"  {label:34s} {medians[key]:8.3f}")
    print("ratios:")
    print(f"  bash -c true / persistent shell   {medians['bash'] / medians['shell']:8.1f}x")
    print(f"  fresh bwrap  / persistent shell   {medians['bwrap'] / medians['shell']:8.1f}x")
    print(f"  nsenter exec / persistent shell   {medians['exec'] / medians['shell']:8.1f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    asyncio.run(main(parser.parse_args().runs))
