"""Where a Harbor trial's seconds go: every environment call Harbor makes, timed.

    .venv/bin/python benchmarks/profile_trial.py [TASK_DIR] [--agent oracle] [--engine podman]

Prints one line per call (method, argument, seconds) and the totals per method; the image is
built once before the timed trial so the build cache is not part of it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from autoenvscaling.tools.sandbox import harbor_env
from autoenvscaling.tools.sandbox.container import ContainerSandbox
from autoenvscaling.tools.trials.trial import run_trial

os.environ.setdefault("HARBOR_TELEMETRY", "0")
REPO = Path(__file__).resolve().parents[1]
CALLS: list[tuple[str, str, float]] = []


def timed(owner: Any, name: str, label: str) -> None:
    original = getattr(owner, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            arg = str(args[1])[:60].replace("\n", " ") if len(args) > 1 else ""
            CALLS.append((label, arg, time.perf_counter() - started))

    setattr(owner, name, wrapper)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("task", type=Path, nargs="?", default=REPO / "tasks/seed/csv-column-sum")
    parser.add_argument("--agent", default="oracle")
    parser.add_argument("--engine", default="podman")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    env_cls = harbor_env.SandboxEnvironment
    for name in (
        "start",
        "stop",
        "exec",
        "upload_file",
        "upload_dir",
        "download_file",
        "download_dir",
    ):
        timed(env_cls, name, f"env.{name}")
    timed(harbor_env.EngineEnvironment, "_start_sandbox", "  build+start")
    timed(ContainerSandbox, "start", "    container.start")
    timed(ContainerSandbox, "close", "    container.close")
    await run_trial(args.task, agent=args.agent, backend=args.engine)  # warm: image built
    for _ in range(args.repeat):
        CALLS.clear()
        started = time.perf_counter()
        outcome = await run_trial(args.task, agent=args.agent, backend=args.engine)
        total = time.perf_counter() - started
        for label, arg, sec in CALLS:
            print(f"{sec:7.3f}  {label:22s} {arg}")
        sums: dict[str, list[float]] = defaultdict(list)
        for label, _, sec in CALLS:
            sums[label.strip()].append(sec)
        print(f"trial {total:.2f} s reward {outcome.reward} error {outcome.error}")
        for label, secs in sorted(sums.items(), key=lambda kv: -sum(kv[1])):
            print(f"  {label:22s} n={len(secs):2d} total {sum(secs):6.2f} s")


if __name__ == "__main__":
    asyncio.run(main())
