"""`autoenvscaling sft-data`: verified trajectories -> SFT data (JSONL + Hugging Face dataset).

Mounted by cli/main.py. Imports no torch.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from .train import parse_trl_config

sft_app = typer.Typer(help="SFT data commands.")
console = Console(stderr=True)


@sft_app.command("sft-data")
def sft_data(
    out: Annotated[Path, typer.Argument(help="Output folder (sft.jsonl, dataset/, report.json).")],
    seed: Annotated[
        Path | None,
        typer.Option("--seed", exists=True, help="Pool of Harbor tasks whose solve.sh to replay."),
    ] = None,
    runs: Annotated[
        list[Path],
        typer.Option("--run", exists=True, help="Run folder to harvest (repeatable)."),
    ] = [],  # noqa: B006
    only: Annotated[
        list[str], typer.Option("--task", help="Replay only these seed task names (repeatable).")
    ] = [],  # noqa: B006
    backend: Annotated[
        str | None, typer.Option("--backend", "-b", help="Sandbox engine; default: the default.")
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-n")] = 2,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Replay SEED's reference solutions through the served solver (kept at reward 1.0) and
    harvest solved / admitted attempts from RUN folders; write deduplicated SFT data to OUT."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..graphs.cold_start.solver_replay import replay_tasks, served_solver_interface
    from ..training.sft.data import (
        deduplicate,
        harvest_run,
        to_hf_dataset,
        write_jsonl,
    )

    if seed is None and not runs:
        raise typer.BadParameter("give --seed POOL and/or --run RUN_DIR")
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    examples = []
    report: dict = {"replays": [], "runs": {}}
    if seed is not None:
        tasks = sorted(p for p in seed.iterdir() if (p / "task.toml").is_file())
        if only:
            missing = sorted(set(only) - {t.name for t in tasks})
            if missing:
                raise typer.BadParameter(f"no such seed tasks: {', '.join(missing)}")
            tasks = [t for t in tasks if t.name in only]

        def progress(result) -> None:  # noqa: ANN001
            mark = "[green]kept[/]" if result.kept else f"[yellow]dropped[/] ({result.reason})"
            console.print(
                f"  {result.task_id}: {result.commands} commands, reward {result.reward} "
                f"{mark} {result.duration_sec:.0f} s"
            )

        console.print(f"replaying {len(tasks)} reference solutions through the served solver")
        results, replayed = asyncio.run(
            replay_tasks(
                tasks,
                store_path=out / "rollouts.db",
                backend=backend,
                trials_dir=out / "trials",
                concurrency=concurrency,
                on_done=progress,
            )
        )
        examples += replayed
        report["replays"] = [r.model_dump(mode="json") for r in results]
    if runs:
        interface = asyncio.run(served_solver_interface())
        for run in runs:
            harvest = harvest_run(
                run,
                first_messages=interface.first_messages,
                solver_tools=interface.tools,
            )
            examples += harvest.examples
            report["runs"][str(run)] = {
                "examples": len(harvest.examples),
                "skipped": harvest.skipped,
            }
            console.print(f"  {run}: {len(harvest.examples)} examples")
    kept, duplicates = deduplicate(examples)
    write_jsonl(kept, out / "sft.jsonl")
    to_hf_dataset(kept).save_to_disk(str(out / "dataset"))
    report.update(
        examples=len(kept),
        duplicates_dropped=duplicates,
        by_role={r: sum(1 for e in kept if e.role == r) for r in ("solver", "proposer")},
        seconds=round(time.monotonic() - started, 1),
        jsonl=str(out / "sft.jsonl"),
        dataset=str(out / "dataset"),
    )
    (out / "report.json").write_text(json.dumps(report, indent=2))
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    console.print(
        f"[green]{len(kept)} examples[/] ({duplicates} duplicates dropped) -> "
        f"{out / 'sft.jsonl'} and {out / 'dataset'} in {report['seconds']} s"
    )


@sft_app.command("cold-start")
def cold_start(
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks",
            exists=True,
            help="Tasks to replay (default: the embedded preset's cold-start split, the one "
            "`autoenvscaling run` replays: another folder is another fingerprint, built apart).",
        ),
    ] = None,
    trl_config: Annotated[
        str | None,
        typer.Option(help="Fields of TRL's SFTConfig over ours, as JSON (a new fingerprint)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the card as JSON.")] = False,
) -> None:
    """Build the embedded policy's cold start once per machine (what `autoenvscaling run` then
    serves to both roles); later calls find it and return at once. `make run` calls this first."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..graphs.cold_start.start import cold_start_checkpoint, cold_start_splits, settings_for
    from ..graphs.config import RunConfig, preset
    from ..training.serving.embedded_setup import (
        embedded_cache_dir,
        ensure_embedded_assets,
        ensure_hf_base_model,
    )

    config = RunConfig(**preset("embedded"), cold_start_trl_config=parse_trl_config(trl_config))
    # The run's own split (cli/run.py), never the pool's seed: a build on any other folder is one
    # `make run` cannot reuse, and it would build the cold start a second time.
    try:
        tasks_dir, splits = cold_start_splits(
            tasks or config.cold_start_tasks, config.seed_dir, config.heldout_dir
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--tasks") from None
    base = ensure_hf_base_model(ensure_embedded_assets())
    started = time.monotonic()
    _checkpoint, card = asyncio.run(
        cold_start_checkpoint(
            embedded_cache_dir() / "cold-start",
            base_model=str(base),
            tasks_dir=tasks_dir,
            settings=settings_for(config),
            backend=config.backend,
            progress=console.print,
            splits=splits,
        )
    )
    if as_json:
        typer.echo(card.model_dump_json(indent=2))
    console.print(f"cold start ready in {time.monotonic() - started:.0f} s: {card.checkpoint}")
