"""`autoenvscaling validate TASK...`: run the admission gate on task folders.

Mounted into the main app by cli/main.py (`_mount_subapps`). Exit status (cli/exit_codes.py): 0
when every task is admitted, 1 when one is rejected (task_wrong), 4 when one could not be judged on
this machine (cannot_run_here: a base image, the internet, GPUs, compose; see `missing`), 3 when
the gate itself could not judge one (infrastructure), 2 for a usage error.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .defaults import ResolvedModel, model_or_embedded
from .exit_codes import ExitCode, exit_code_for_kinds
from .options import BackendOpt, HarborEnvOpt
from .progress import TaskProgress

validate_app = typer.Typer(no_args_is_help=True)
console = Console(stderr=True)


def _progress(bar: TaskProgress, quiet: bool) -> Callable[[dict[str, Any]], None]:
    def on_event(event: dict[str, Any]) -> None:
        name = escape(Path(event["task"]).name)
        if event["event"] == "stage":
            bar.status(f"{name}: {event['stage']}")
            if quiet:
                return
            if event["skipped"]:
                mark = "[dim]skipped[/]"
            elif event["passed"]:
                mark = "[green]ok[/]"
            else:
                mark = "[yellow]infra[/]" if event["infrastructure_error"] else "[red]failed[/]"
            bar.print(f"  {name}: {event['stage']} {mark} ({event['duration_sec']:.1f} s)")
        elif event["event"] == "verdict":
            bar.advance()
            if quiet:
                return
            verdict = (
                "[green]admitted[/]"
                if event["admitted"]
                else f"[red]rejected[/] ({event['stage']})"
            )
            bar.print(f"\\[{event['index'] + 1}/{event['total']}] {name}: {verdict}")

    return on_event


@validate_app.command("validate")
def validate(
    tasks: Annotated[list[Path], typer.Argument(help="Candidate Harbor task folders.")],
    backend: BackendOpt = "podman",
    harbor_env: HarborEnvOpt = None,
    skip: Annotated[
        list[str] | None,
        typer.Option("--skip", help="Stage to skip (repeatable), e.g. --skip calibrate."),
    ] = None,
    solver: Annotated[
        str | None,
        typer.Option("--solver", help="Solver for calibrate: oracle | nop | module:Class."),
    ] = None,
    calibrate_policy: Annotated[
        bool,
        typer.Option(
            "--calibrate-policy",
            help="Calibrate with our solver agent on --model (default: the embedded policy).",
        ),
    ] = False,
    model: Annotated[
        str | None, typer.Option(help="Solver model for --calibrate-policy (init_chat_model).")
    ] = None,
    base_url: Annotated[str | None, typer.Option(help="Its OpenAI-compatible endpoint")] = None,
    decontam: Annotated[
        list[Path] | None,
        typer.Option(
            "--decontam",
            help="Benchmark to decontaminate against (repeatable): a folder of Harbor tasks or a "
            "prepared index, as `run --decontam`.",
        ),
    ] = None,
    heldout: Annotated[
        list[Path] | None,
        typer.Option(
            "--heldout",
            hidden=True,
            help="Deprecated name of --decontam (`run --heldout` is the evaluation set).",
        ),
    ] = None,
    pool: Annotated[Path | None, typer.Option("--pool", help="Task pool for dedup.")] = None,
    repeat: Annotated[int, typer.Option("--repeat", help="Oracle reruns.")] = 2,
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-n", help="Candidates at once.")
    ] = 2,
    trials_dir: Annotated[
        Path | None, typer.Option("--trials-dir", help="Keep every trial folder here.")
    ] = None,
    allow_internet: Annotated[
        bool,
        typer.Option(
            "--allow-internet",
            help="Let tasks that declare the internet (allow_internet = true) have it; "
            "recorded in each verdict.",
        ),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON array on stdout.")] = False,
) -> None:
    """Run the admission gate on TASKS and print one verdict per task."""

    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..graphs.validation.builder import validate_batch
    from ..tools.gate import GateConfig

    if calibrate_policy and solver:
        raise typer.BadParameter("--calibrate-policy and --solver both name the solver; pick one")
    if heldout:
        # One meaning per flag name: `--heldout` is the evaluation set (`run --heldout`).
        console.print(
            "[yellow]validate --heldout is deprecated: it is now --decontam (the benchmark the "
            "decontam stage checks against), as in `run --decontam`; `run --heldout` names the "
            "tasks the solver is evaluated on[/]"
        )
    decontam_dirs = [*(decontam or []), *(heldout or [])]

    def config_for(resolved: ResolvedModel | None) -> GateConfig:
        common: dict[str, Any] = {
            "backend": backend,
            "environment_options": json.loads(harbor_env.read_text()) if harbor_env else {},
            "repeat": repeat,
            "heldout_dirs": decontam_dirs,
            "pool_dir": pool,
            "concurrency": concurrency,
            "trials_dir": trials_dir,
            "allow_internet": allow_internet,
        }
        try:
            if resolved is None:
                # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
                from ..graphs.solver.attempt import SOLVER_AGENT

                return GateConfig(solver=solver, solver_agent=SOLVER_AGENT, **common).with_skip(
                    *(skip or [])
                )
            # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
            from ..graphs.models import ModelConfig
            from ..graphs.proposer.settings import gate_config

            policy = ModelConfig(
                model=resolved.model, base_url=resolved.base_url, tool_choice=resolved.tool_choice
            )
            return gate_config(solver=policy, **common).with_skip(*(skip or []))
        except (ValidationError, ValueError) as exc:
            raise typer.BadParameter(str(exc)) from None

    def run(config: GateConfig) -> list:
        with TaskProgress("validate", total=len(tasks), quiet=as_json, console=console) as bar:
            return asyncio.run(validate_batch(tasks, config, on_event=_progress(bar, as_json)))

    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.gate.harness import SCRATCH_PREFIX
    from ..tools.scratch import sweep_scratch

    for name in sweep_scratch(SCRATCH_PREFIX):  # trial folders of a gate that was killed
        console.print(f"removed {escape(name)} (left by a gate that was killed)")
    answered = None
    if calibrate_policy and "calibrate" not in (skip or []):
        config_for(ResolvedModel(model="check:options"))  # bad options fail before a server starts
        with model_or_embedded(model, base_url, console) as resolved:
            answered = resolved.label
            if not as_json:
                console.print(f"calibration solver model: {answered}")
            verdicts = run(config_for(resolved))
    else:
        verdicts = run(config_for(None))
    if as_json:
        rows = [
            {
                "task": v.task,
                "admitted": v.admitted,
                "stage": v.stage,
                "reason": v.reason,
                "proposer_reward": v.proposer_reward,
                "infrastructure_error": v.infrastructure_error,
                "kind": v.kind,
                "missing": [m.model_dump() for m in v.missing],
                "needs_gpus": v.needs_gpus,
                "excerpt": v.excerpt,
                "timings": v.timings,
                "skipped": v.skipped,
                "calibration_model": answered,
                "verifier_mode": v.verifier_mode,
                "probes": _probes(v),
            }
            for v in verdicts
        ]
        typer.echo(json.dumps(rows, indent=2))
    else:
        table = Table("task", "verdict", "stage", "reward", "reason", "seconds")
        for v in verdicts:
            mark = (
                "[green]admitted[/]"
                if v.admitted
                else "[yellow]needs a GPU[/]"
                if v.needs_gpus
                else "[yellow]cannot run here[/]"
                if v.kind == "cannot_run_here"
                else "[yellow]infra[/]"
                if v.infrastructure_error
                else "[red]rejected[/]"
            )
            reward = "-" if v.proposer_reward is None else f"{v.proposer_reward:+g}"
            table.add_row(
                escape(v.task_name),
                mark,
                v.stage or "",
                reward,
                escape(v.reason),
                f"{v.duration_sec:.1f}",
            )
        Console().print(table)
    code = exit_code_for_kinds(
        None
        if v.admitted
        else v.kind or ("infrastructure" if v.infrastructure_error else "task_wrong")
        for v in verdicts
    )
    if code != ExitCode.OK:
        raise typer.Exit(code)


def _probes(verdict: Any) -> dict[str, dict[str, Any]]:
    """Each anti-cheat probe's result: ran or not, passed, reward, why (empty if not reached)."""
    for stage in verdict.stages:
        if stage.stage == "anti_cheat":
            return {
                name: {k: probe.get(k) for k in ("passed", "skipped", "reward", "reason")}
                for name, probe in (stage.details.get("probes") or {}).items()
            }
    return {}
