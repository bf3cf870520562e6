"""`autoenvscaling propose`: let N proposers write candidate tasks; each faces the admission gate."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..graphs.config import PROPOSER_MAX_TURNS
from .defaults import model_or_embedded
from .exit_codes import exit_code_for
from .options import ModelOpt
from .progress import TaskProgress

propose_app = typer.Typer(no_args_is_help=False)
console = Console(stderr=True)


@propose_app.command()
def propose(
    n: Annotated[int, typer.Option("--n", "-n", help="Proposer attempts (one candidate each)")] = 1,
    model: ModelOpt = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint")] = None,
    arm: Annotated[str, typer.Option(help="terminal | error_feedback | prompt_only")] = "terminal",
    solver_feedback: Annotated[
        bool,
        typer.Option(
            "--solver-feedback/--no-solver-feedback", help="Show the proposer the solver's rollouts"
        ),
    ] = True,
    store: Annotated[
        str, typer.Option(help="Rollout store: a SQLite file, or a postgresql:// URL")
    ] = "rollouts.db",
    out: Annotated[Path, typer.Option(help="Candidate task folders go here")] = Path("candidates"),
    pool: Annotated[Path, typer.Option(help="Task pool: examples and dedup")] = Path("tasks/seed"),
    max_turns: Annotated[
        int, typer.Option(help="Model calls per episode (terminal arm; run's --proposer-max-turns)")
    ] = PROPOSER_MAX_TURNS,
    max_revisions: Annotated[int, typer.Option(help="Revisions after a rejection")] = 2,
    max_tokens: Annotated[int, typer.Option(help="Cap on one model reply")] = 8192,
    calibrate: Annotated[
        bool,
        typer.Option(
            "--calibrate/--no-calibrate", help="Run the gate's calibrate stage with the solver"
        ),
    ] = False,
    solver_model: Annotated[
        str | None,
        typer.Option(help="Solver model for calibration (default: --model, the shared policy)"),
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", "-b", help="Gate engine: podman | docker")
    ] = "podman",
    policy_version: Annotated[str, typer.Option(help="Recorded with every rollout")] = "base",
    as_json: Annotated[
        bool, typer.Option("--json", help="Print machine-readable JSON on stdout.")
    ] = False,
) -> None:
    """Let N proposers write Harbor tasks; each submission goes through the full admission gate."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..graphs.models import ModelConfig
    from ..graphs.proposer.record import propose
    from ..graphs.proposer.settings import ARMS, ProposerSettings, gate_config, proposer_budget
    from ..tools.agents.brief import build_brief
    from ..tools.rollouts.store import RolloutStore

    if arm not in ARMS:
        raise typer.BadParameter(f"--arm must be one of {', '.join(ARMS)}, not {arm!r}")
    if not pool.is_dir():
        raise typer.BadParameter(f"--pool {pool} is not a folder of Harbor tasks")

    def settings_for(resolved) -> ProposerSettings:  # noqa: ANN001
        proposer = ModelConfig(
            model=resolved.model,
            base_url=resolved.base_url,
            tool_choice=resolved.tool_choice,
            max_tokens=max_tokens,
        )
        solver = None
        if calibrate:
            solver = (
                ModelConfig(model=solver_model, base_url=base_url) if solver_model else proposer
            )
        return ProposerSettings(
            model=proposer,
            arm=arm,
            solver_feedback=solver_feedback,
            budget=proposer_budget(max_turns),
            max_revisions=max_revisions,
            store_path=str(store),
            policy_version=policy_version,
            run_id=f"cli-{int(time.time())}",
            gate=gate_config(backend=backend, pool_dir=pool, solver=solver),
        )

    async def run_all(bar: TaskProgress) -> list:
        with RolloutStore(store) as opened:
            briefs = [
                build_brief(opened, pool, variant=i, solver_feedback=solver_feedback)
                for i in range(n)
            ]
        results = []
        for i, brief in enumerate(briefs):
            bar.status(f"proposal {i + 1} of {n}")
            result = await propose(brief, settings, out_dir=out, index=i)
            bar.advance()
            where = (
                "admitted"
                if result.admitted
                else (f"rejected at {result.verdict.stage}" if result.verdict else result.outcome)
            )
            if not as_json:
                bar.print(
                    f"  #{i} {Path(result.candidate).name}: {where}, reward {result.reward} "
                    f"({result.revisions} revisions, {result.tool_calls} tool calls)"
                )
            results.append(result)
        return results

    with model_or_embedded(model, base_url, console) as resolved:
        settings = settings_for(resolved)
        if not as_json:
            console.print(f"proposer model: {resolved.label}")
        with TaskProgress("propose", total=n, quiet=as_json, console=console) as bar:
            results = asyncio.run(run_all(bar))
    if as_json:
        typer.echo(
            json.dumps(
                [
                    r.model_dump(mode="json", exclude={"verdict"})
                    | {
                        "model": resolved.label,
                        "stage": r.verdict.stage if r.verdict else None,
                        "reason": r.verdict.reason if r.verdict else r.error,
                    }
                    for r in results
                ],
                indent=2,
            )
        )
    else:
        _table(results)
    # A rejected candidate is a result; an attempt that errored (the model endpoint, a sandbox,
    # a gate that could not judge) is not, and is never the task's fault (cli/exit_codes.py).
    raise typer.Exit(exit_code_for("infrastructure" for r in results if r.outcome == "error"))


def _table(results: list) -> None:
    table = Table("candidate", "admitted", "reward", "stage", "revisions", "reason")
    for r in results:
        table.add_row(
            Path(r.candidate).name,
            "yes" if r.admitted else "no",
            "-" if r.reward is None else f"{r.reward:g}",
            (r.verdict.stage if r.verdict else None) or "-",
            str(r.revisions),
            ((r.verdict.reason if r.verdict else r.error) or "")[:80],
        )
    Console().print(table)
