"""What a cold start teaches, measured on the policy it serves (issue 38, item 6).

    python benchmarks/bench_cold_start.py LABEL [--cache DIR [--build SETTINGS_JSON]]
        [--samples K] [--proposer-samples K] [--out FILE]

`--build` first builds a cold start into DIR (never the machine's cache) with the embedded
preset's settings and SETTINGS_JSON's fields over them, e.g. '{"epochs": {"solver": 4,
"proposer": 1}}' ('{}': the default); copy another folder's cold-start.jsonl and card.json into
DIR first and only the SFT runs. Then it serves the embedded model (the base weights, or DIR's
current checkpoint, as `autoenvscaling run` serves it) and measures, with 95% Wilson intervals
(tools/stats.py):
- **held-out**: the solver on tasks/generated/heldout (12 tasks the cold start never replayed),
  K samples each at the run's concurrency, the run's solver settings (graphs/flywheel/measure.py
  `evaluate_heldout` does the same in a run): success, and how many attempts call a tool;
- **proposer's first reply**: the served proposer's reply to the first prompt of each authoring
  episode in the cold start's dataset (the compact system prompt and the round-1 brief), K
  samples each: does it write files (`<file>` blocks the episode would accept, or a write_file
  call), and does a `task.toml` it writes parse. These prompts are the ones the cold start
  trained on: it measures whether the format was learnt, not whether it generalises.
Nothing here writes to the machine's default cold-start cache.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx

from autoenvscaling.graphs.agent.loop import LoopBudget
from autoenvscaling.graphs.cold_start.start import DATASET, task_folders
from autoenvscaling.graphs.config import RunConfig, preset
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
from autoenvscaling.tools.stats import rate
from autoenvscaling.tools.tasks.file_blocks import ReplyFormatError, read_file_blocks
from autoenvscaling.training.checkpoints import CheckpointRegistry
from autoenvscaling.training.serving.embedded_server import EmbeddedLlamaServer
from autoenvscaling.training.serving.embedded_setup import ensure_embedded_assets


def first_prompts(dataset: Path) -> list[dict[str, Any]]:
    """Each authoring episode's prompt up to its first reply, with its tools."""
    out = []
    for line in dataset.read_text().splitlines():
        row = json.loads(line)
        if row["role"] != "proposer":
            continue
        first = next(i for i, m in enumerate(row["messages"]) if m["role"] == "assistant")
        out.append(
            {"task": row["task_id"], "messages": row["messages"][:first], "tools": row["tools"]}
        )
    return out


def judge_reply(message: dict[str, Any]) -> dict[str, bool]:
    """Writes files (blocks the episode reads, or a write_file call with content); a written
    task.toml parses."""
    files: dict[str, str] = {}
    try:
        files = read_file_blocks(message.get("content") or "")
    except ReplyFormatError:
        pass
    for call in message.get("tool_calls") or []:
        fn = call.get("function", {})
        if fn.get("name") == "write_file":
            try:
                args = json.loads(fn.get("arguments") or "{}")
            except json.JSONDecodeError:
                continue
            if isinstance(args, dict) and args.get("path") and "content" in args:
                files[str(args["path"])] = str(args["content"])
    toml_ok = False
    if "task.toml" in files:
        try:
            tomllib.loads(files["task.toml"])
            toml_ok = True
        except tomllib.TOMLDecodeError:
            pass
    return {"writes": bool(files), "toml_parses": toml_ok}


async def proposer_first_replies(
    base_url: str, model: str, prompts: list[dict[str, Any]], samples: int, config: RunConfig
) -> list[dict[str, Any]]:
    results = []
    async with httpx.AsyncClient(timeout=600) as client:
        for prompt in prompts:
            for sample in range(samples):
                reply = await client.post(
                    f"{base_url}/chat/completions",
                    json={
                        "model": model,
                        "messages": prompt["messages"],
                        "tools": prompt["tools"],
                        "tool_choice": "auto",
                        "temperature": config.temperature,
                        "max_tokens": config.max_tokens,
                        "seed": sample,
                    },
                )
                reply.raise_for_status()
                message = reply.json()["choices"][0]["message"]
                results.append({"task": prompt["task"], "sample": sample, **judge_reply(message)})
    return results


async def heldout(
    base_url: str, chat_model: str, samples: int, config: RunConfig, store: Path, label: str
) -> list[dict[str, Any]]:
    settings = SolverSettings(
        model=ModelConfig(
            model=chat_model,
            base_url=base_url,
            tool_choice=config.policy_tool_choice,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            context_window=config.context_window,
        ),
        budget=LoopBudget(max_turns=config.solver_max_turns),
        store_path=str(store),
        run_id=label,
        tool_output_chars=config.tool_output_chars,
    )
    gate = asyncio.Semaphore(config.concurrency)

    async def one(task: Path, sample: int) -> dict[str, Any]:
        async with gate:
            result = await solve_task(task, settings, sample=sample, backend=config.backend)
        return {
            "task": task.name,
            "sample": sample,
            "reward": result.reward,
            "fault": result.fault,
            "steps": result.steps,
        }

    tasks = task_folders(Path(config.heldout_dir or ""))
    return list(await asyncio.gather(*(one(t, s) for t in tasks for s in range(samples))))


async def build(cache: Path, config: RunConfig, overrides: dict[str, Any]) -> Any:
    """A cold start in `cache` with the preset's settings and `overrides` over them."""
    from autoenvscaling.graphs.cold_start.start import (
        ColdStartSettings,
        cold_start_checkpoint,
        settings_for,
    )
    from autoenvscaling.training.serving.embedded_setup import ensure_hf_base_model

    _checkpoint, card = await cold_start_checkpoint(
        cache,
        base_model=str(ensure_hf_base_model(ensure_embedded_assets())),
        tasks_dir=Path(config.cold_start_tasks or ""),
        settings=ColdStartSettings.model_validate(settings_for(config).model_dump() | overrides),
        backend=config.backend,
        progress=lambda line: print(line, flush=True),
    )
    return card


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("label")
    parser.add_argument("--cache", type=Path, help="A cold-start cache folder (none: base weights)")
    parser.add_argument("--dataset", type=Path, help="Proposer prompts (default: CACHE's dataset)")
    parser.add_argument("--build", help="Build into --cache first, with these settings (JSON)")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--proposer-samples", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("/tmp/bench_cold_start.json"))
    args = parser.parse_args()
    config = RunConfig(**preset("embedded"))
    started = time.monotonic()
    if args.build is not None:
        if args.cache is None:
            sys.exit("--build needs --cache DIR")
        card = await build(args.cache, config, json.loads(args.build))
        print(card.model_dump_json(indent=2, exclude={"settings", "splits"}), flush=True)
    server = EmbeddedLlamaServer(model_path=ensure_embedded_assets().model_path)
    ref = server.start()
    try:
        if args.cache is not None:
            checkpoint = CheckpointRegistry(args.cache / "registry").current()
            if checkpoint is None:
                sys.exit(f"{args.cache} has no current checkpoint")
            ref = await server.activate(checkpoint)
        dataset = args.dataset or (args.cache / DATASET if args.cache else None)
        prompts = first_prompts(dataset) if dataset else []
        t0 = time.monotonic()
        proposer = await proposer_first_replies(
            ref.base_url, ref.model, prompts, args.proposer_samples, config
        )
        t1 = time.monotonic()
        store = args.out.with_suffix(".db")
        solved = await heldout(
            ref.base_url, ref.chat_model, args.samples, config, store, args.label
        )
        t2 = time.monotonic()
    finally:
        server.stop()
    scored = [r["reward"] for r in solved if r["fault"] is None]
    usage = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    report = {
        "label": args.label,
        "checkpoint": ref.checkpoint_id,
        "heldout": rate([r or 0.0 for r in scored]).model_dump(),
        "heldout_faults": sum(1 for r in solved if r["fault"] is not None),
        # The solver's format, before success: does an attempt call its terminal at all.
        "heldout_calls_a_tool": rate([float(r["steps"] > 0) for r in solved]).model_dump(),
        "proposer_writes": rate([float(r["writes"]) for r in proposer]).model_dump(),
        "proposer_toml_parses": rate([float(r["toml_parses"]) for r in proposer]).model_dump(),
        "seconds": {
            "proposer": round(t1 - t0, 1),
            "heldout": round(t2 - t1, 1),
            "total": round(time.monotonic() - started, 1),
        },
        "cpu_seconds_here": round(sum(u.ru_utime + u.ru_stime for u in usage), 1),
        "heldout_attempts": solved,
        "proposer_replies": proposer,
    }
    args.out.write_text(json.dumps(report, indent=2))
    print(json.dumps({k: v for k, v in report.items() if not k.endswith(("attempts", "replies"))}))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
