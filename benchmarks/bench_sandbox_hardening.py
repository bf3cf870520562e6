"""What the build-and-host defences of issue 28 cost per trial, measured on this machine.

    .venv/bin/python benchmarks/bench_sandbox_hardening.py [--rounds 5] [--json]

- static checks, per task of the seed pool: `build_hazards` (the raw-text Dockerfile check
  run by lint and again before every build) and `host_templates` (task.toml `${VAR}`, lint and
  every sandbox start);
- `strip_privileges` over a copy of each seed task (the proposer's workspace, on close);
- a sandbox's life (start, one exec, close) with today's profile against the profile before
  (no keeper uid, no /logs tmpfs, the build's seccomp profile: fallocate allowed), alternating;
  a trial starts one sandbox (two with a separate verifier);
- one image build (`FROM` the base, one RUN, no cache) inside the read-only build namespace
  (buildjail.py) against the same build without it, alternating;
- the writable layer on a filesystem of its own (layerfs.py) against the measured cap it
  replaces, alternating: a sandbox's start (with one exec), a write workload in it (2,000
  files of 4 KB, then 64 MB with fsync) and its close (which drops what was written);
- one writable-layer measurement (`layercap.check`) of a layer holding 4,000 files, the
  work the watcher does once a second per sandbox where the layer is measured.

Needs the default engine (podman) and the base image (`make bases`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HARBOR_TELEMETRY", "0")

from autoenvscaling.tools.sandbox import (  # noqa: E402
    SandboxLimits,
    builders,
    container,
    images,
    layercap,
    layerfs,
    profile,
)
from autoenvscaling.tools.sandbox.bases import require_base  # noqa: E402
from autoenvscaling.tools.sandbox.container import start_workspace  # noqa: E402
from autoenvscaling.tools.sandbox.engine import client  # noqa: E402
from autoenvscaling.tools.tasks.dockerfile import build_hazards  # noqa: E402
from autoenvscaling.tools.tasks.host_env import host_templates  # noqa: E402
from autoenvscaling.tools.tasks.privileges import strip_privileges  # noqa: E402

SEEDS = Path(__file__).resolve().parents[1] / "tasks" / "seed"


def _per_call_us(fn: Callable[[], Any], repeat: int = 200) -> float:
    started = time.perf_counter()
    for _ in range(repeat):
        fn()
    return (time.perf_counter() - started) / repeat * 1e6


def static_costs() -> dict[str, float]:
    tasks = sorted(p for p in SEEDS.iterdir() if (p / "task.toml").exists())
    hazards = [
        _per_call_us(lambda t=t: build_hazards((t / "environment" / "Dockerfile").read_text()))
        for t in tasks
    ]
    templates = [_per_call_us(lambda t=t: host_templates(t)) for t in tasks]
    strips = []
    with tempfile.TemporaryDirectory() as tmp:
        for task in tasks:
            copy = Path(tmp) / task.name
            shutil.copytree(task, copy)
            started = time.perf_counter()
            strip_privileges(copy)
            strips.append((time.perf_counter() - started) * 1e3)
    return {
        "build_hazards_us_median": round(statistics.median(hazards), 1),
        "host_templates_us_median": round(statistics.median(templates), 1),
        "strip_privileges_ms_median": round(statistics.median(strips), 2),
        "tasks": len(tasks),
    }


class _Before:
    """The sandbox profile as it was: no keeper uid, no /logs tmpfs, fallocate allowed."""

    def __enter__(self) -> None:
        self.user, self.host_config = container.KEEPER_USER, profile.host_config
        original = profile.host_config

        def host_config(*args: Any, **kwargs: Any) -> dict[str, Any]:
            config = original(*args, **kwargs)
            config.pop("Tmpfs", None)
            config["SecurityOpt"] = ["no-new-privileges", f"seccomp={profile.seccomp_profile()}"]
            return config

        container.KEEPER_USER = None  # the image's own user
        profile.host_config = host_config

    def __exit__(self, *exc: object) -> None:
        container.KEEPER_USER, profile.host_config = self.user, self.host_config


async def _life() -> float:
    started = time.perf_counter()
    box = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64))
    try:
        await box.exec("true")
    finally:
        await box.close()
    return time.perf_counter() - started


async def lifecycle(rounds: int) -> dict[str, float]:
    await _life()  # warm the engine and the image
    now, before = [], []
    for _ in range(rounds):
        now.append(await _life())
        with _Before():
            before.append(await _life())
    return {
        "sandbox_life_s_now_median": round(statistics.median(now), 3),
        "sandbox_life_s_before_median": round(statistics.median(before), 3),
        "rounds": rounds,
    }


async def _build(context: Path) -> float:
    started = time.perf_counter()
    image = await images.build_image(context, task_name="bench-build-jail", force=True)
    took = time.perf_counter() - started
    await asyncio.to_thread(client("podman").api.remove_image, image.tag, force=True)
    return took


async def build_costs(rounds: int) -> dict[str, float]:
    base = await asyncio.to_thread(require_base, "podman")
    with tempfile.TemporaryDirectory() as tmp:
        context = Path(tmp) / "environment"
        context.mkdir()
        (context / "Dockerfile").write_text(f"FROM {base}\nRUN echo built > /built\n")
        jailed, plain = [], []
        for _ in range(rounds):
            jailed.append(await _build(context))
            original = builders._jailed
            builders._jailed = lambda cmd, env, tmp: cmd
            try:
                plain.append(await _build(context))
            finally:
                builders._jailed = original
    return {
        "build_s_jailed_median": round(statistics.median(jailed), 3),
        "build_s_plain_median": round(statistics.median(plain), 3),
    }


WRITES = (
    'mkdir -p /tmp/w && python3 -c "\n'
    "for i in range(2000): open(f'/tmp/w/{i}', 'wb').write(bytes(4096))\n\" "
    "&& dd if=/dev/zero of=/tmp/w/big bs=1M count=64 conv=fsync 2>/dev/null"
)


class _Measured:
    """The writable layer left where the engine put it, measured by the watcher."""

    def __enter__(self) -> None:
        self.confine = layerfs.confine

        def refuse(*_args: Any) -> str:
            raise layerfs.NotConfinedError("benchmark: measured")

        layerfs.confine = refuse

    def __exit__(self, *exc: object) -> None:
        layerfs.confine = self.confine


async def _layer_life() -> tuple[float, float, float]:
    """(start and one exec, the write workload, close) in seconds."""
    started = time.perf_counter()
    box = await start_workspace(limits=SandboxLimits(memory_mb=512, pids=64, disk_mb=4096))
    try:
        await box.exec("true")
        start = time.perf_counter() - started
        started = time.perf_counter()
        await box.exec(WRITES, timeout_sec=300)
        writes = time.perf_counter() - started
        started = time.perf_counter()
    finally:
        await box.close()
    return start, writes, time.perf_counter() - started


async def layer_costs(rounds: int) -> dict[str, float]:
    own, measured = [], []
    for _ in range(rounds):
        own.append(await _layer_life())
        with _Measured():
            measured.append(await _layer_life())
    results = {}
    for i, step in enumerate(("start", "writes", "close")):
        results[f"layer_fs_{step}_s_median"] = round(statistics.median(o[i] for o in own), 3)
        results[f"layer_measured_{step}_s_median"] = round(
            statistics.median(m[i] for m in measured), 3
        )
    return results


async def layer_measure() -> dict[str, float]:
    box = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64, disk_mb=4096))
    try:
        await box.exec(
            'mkdir -p /tmp/many && python3 -c "\n'
            "for i in range(4000): open(f'/tmp/many/{i}', 'w').close()\n\""
        )
        started = time.perf_counter()
        for _ in range(10):
            layercap.check(box)
        took = (time.perf_counter() - started) / 10
    finally:
        await box.close()
    return {"layer_check_ms_4000_files": round(took * 1e3, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = static_costs()
    results |= asyncio.run(lifecycle(args.rounds))
    results |= asyncio.run(build_costs(args.rounds))
    results |= asyncio.run(layer_costs(args.rounds))
    results |= asyncio.run(layer_measure())
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"{key:34} {value}")


if __name__ == "__main__":
    main()
