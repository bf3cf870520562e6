"""GRPO worker peak memory and tokens/s: one embedded-round step, side by side per setting.

    .venv/bin/python benchmarks/bench_grpo_memory.py [--task access-log-report]
        [--settings 'PREFIX;...'] [--json OUT]

Runs the real worker (training/grpo/worker.py through TRLGRPOBackend, as the flywheel's training
node does) on the embedded SmolLM2-135M HF weights, with the embedded round's budgets
(graphs/config.py's embedded preset: 4 rollouts of one task a step) and TrainHyperParams'
defaults otherwise, for one optimizer step on one seed task, episodes in podman sandboxes.

Each setting runs in a fresh process, so the worker's peak RSS is exact: the kernel's maximum
resident set of that process's children (`getrusage(RUSAGE_CHILDREN)`), the worker being the
only large one. Tokens/s = the step's completion tokens (TRL's `completions/mean_length` x
rollouts) / TRL's `step_time` (generation, tool calls, verifiers and the training passes).
One-time set-up is outside every measurement: the model is exported and the task's image built
before the first setting starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

#: The worker without the heap trim between passes (training/grpo/heap.py).
UNTRIMMED = {"AUTOENVSCALING_TRIM_HEAP": "0"}
#: name -> (TrainHyperParams overrides, worker environment). The last one is the default now.
SETTINGS: dict[str, tuple[dict[str, Any], dict[str, str]]] = {
    "checkpointing off, whole batch, TRL's CPU head (issue #18's setting)": (
        {"gradient_checkpointing": False, "micro_batch_size": None},
        {"AUTOENVSCALING_COMPACT_LM_HEAD": "0", **UNTRIMMED},
    ),
    "checkpointing on, whole batch, TRL's CPU head (main before the fix)": (
        {"gradient_checkpointing": True, "micro_batch_size": None},
        {"AUTOENVSCALING_COMPACT_LM_HEAD": "0", **UNTRIMMED},
    ),
    "checkpointing off, one rollout a pass, completion-only head": (
        {"gradient_checkpointing": False, "micro_batch_size": 1},
        UNTRIMMED,
    ),
    # glibc's dynamic mmap threshold grows to 32 MB as tensors are freed, so later tensors come
    # from the heap and its growth stays; a fixed threshold sends large tensors back to the kernel.
    # (MALLOC_ARENA_MAX=2 was tried: 3.61 GB, so the arenas are not the cause.)
    "checkpointing on, one rollout a pass, completion-only head, mmap threshold 1 MB": (
        {},
        {"MALLOC_MMAP_THRESHOLD_": "1048576", **UNTRIMMED},
    ),
    "checkpointing on, one rollout a pass, completion-only head, mmap threshold 4 MB": (
        {},
        {"MALLOC_MMAP_THRESHOLD_": "4194304", **UNTRIMMED},
    ),
    # The same without training/grpo/heap.py's malloc_trim between passes (main before it).
    "checkpointing on, one rollout a pass, completion-only head, heap not trimmed": (
        {},
        UNTRIMMED,
    ),
    "checkpointing on, one rollout a pass, completion-only head (the defaults now)": ({}, {}),
}


def _setup(task_dir: Path) -> Path:
    """The embedded HF weights and the task's image, once (never inside a measurement)."""
    from autoenvscaling.training.grpo.sandboxes import task_starter
    from autoenvscaling.training.serving.embedded_setup import (
        ensure_embedded_assets,
        ensure_hf_base_model,
    )

    model = ensure_hf_base_model(ensure_embedded_assets())

    async def build_image() -> None:
        live = await task_starter("podman")(task_dir)
        await live.close()

    asyncio.run(build_image())
    return model


def _child(name: str, model: Path, task_dir: Path) -> dict[str, Any]:
    from autoenvscaling.graphs.config import preset
    from autoenvscaling.training.backend import TrainHyperParams, TrainJob, TrainProgress
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend

    overrides, env = SETTINGS[name]
    embedded = preset("embedded")
    hyper = TrainHyperParams(
        steps=1,
        num_generations=embedded["num_generations"],
        tasks_per_step=embedded["train_tasks_per_step"],
        **overrides,
    )
    events: list[TrainProgress] = []
    with tempfile.TemporaryDirectory(prefix="aes-bench-grpo-") as tmp:
        job = TrainJob(
            job_id="bench-grpo-memory",
            base_model=str(model),
            task_dirs=[task_dir],
            work_dir=Path(tmp) / "work",
            hyper=hyper,
            sandbox_backend="podman",
        )
        backend = TRLGRPOBackend(CheckpointRegistry(Path(tmp) / "registry"), env=env)
        started = time.perf_counter()
        result = asyncio.run(backend.train(job, events.append))
        wall = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    step = next(e.metrics for e in events if e.stage == "step" and "step_time" in e.metrics)
    rollouts = hyper.num_generations * hyper.tasks_per_step
    tokens = step["completions/mean_length"] * rollouts
    return {
        "peak_rss_gb": round(peak_mb / 1024, 2),
        "tokens_per_s": round(tokens / step["step_time"], 2),
        "completion_tokens": round(tokens),
        "step_time_s": round(step["step_time"], 1),
        "worker_wall_s": round(wall, 1),
        "rewards": [r for e in events if e.stage == "rewards" for r in e.metrics["rewards"]],
        "passes": hyper.passes(rollouts)[1],
        "steps_done": result.steps_done,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="access-log-report", help="a folder of tasks/seed/")
    parser.add_argument(
        "--settings", help="prefixes of the settings to run, separated by ; (default: all)"
    )
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--model", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    task_dir = (REPO / "tasks" / "seed" / args.task).resolve()

    if args.child:
        out = _child(args.child, args.model, task_dir)
        assert args.json is not None
        args.json.write_text(json.dumps(out))
        return

    chosen = [
        name
        for name in SETTINGS
        if not args.settings or any(name.startswith(p) for p in args.settings.split(";"))
    ]
    model = _setup(task_dir)
    results: dict[str, Any] = {"task": args.task, "load_start": round(os.getloadavg()[0], 1)}
    for name in chosen:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "out.json"
            done = subprocess.run(
                [sys.executable, __file__, "--child", name, "--model", str(model)]
                + ["--task", args.task, "--json", str(out)],
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0 or not out.exists():
                results[name] = {"error": (done.stderr or done.stdout).strip()[-600:]}
            else:
                results[name] = json.loads(out.read_text())
        print(f"{name}: {results[name]}", file=sys.stderr, flush=True)
    results["load_end"] = round(os.getloadavg()[0], 1)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
