"""`autoenvscaling` command line: one command per job; sub-apps for the MCP servers and training."""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from ..tools.agents.solver_interface import SOLVER_MAX_TURNS
from .defaults import model_or_embedded
from .exit_codes import exit_code_for
from .options import BackendOpt, HarborEnvOpt, JsonOpt, ModelOpt
from .progress import TaskProgress

for _var, _value in (
    ("HARBOR_TELEMETRY", "0"),
    ("LANGGRAPH_CLI_NO_ANALYTICS", "1"),
    ("LANGGRAPH_NO_VERSION_CHECK", "1"),
):
    os.environ.setdefault(_var, _value)

app = typer.Typer(
    name="autoenvscaling",
    help="Run the data flywheel for terminal agents: propose, admit, train, swap, refresh.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)
console = Console(stderr=True)


def _mount_subapps() -> None:
    """Sub-apps live next to what they drive; a missing optional one must not break the CLI."""

    for module, attr, name in (
        ("autoenvscaling.cli.run", "run_app", None),
        ("autoenvscaling.cli.mcp", "mcp_app", "mcp"),
        ("autoenvscaling.cli.export", "export_app", "export"),
        ("autoenvscaling.cli.train", "train_app", None),
        ("autoenvscaling.cli.sft", "sft_app", None),
        ("autoenvscaling.cli.validate", "validate_app", None),
        ("autoenvscaling.cli.import_tasks", "import_app", None),
        ("autoenvscaling.cli.propose", "propose_app", None),
        ("autoenvscaling.cli.view", "view_app", None),
    ):
        try:
            sub = getattr(importlib.import_module(module), attr)
        except ModuleNotFoundError as exc:
            if exc.name != module:  # a broken sub-app must fail loudly, not vanish
                raise
            continue
        if name:
            app.add_typer(sub, name=name)
        else:
            app.registered_commands.extend(sub.registered_commands)


@app.command()
def trial(
    tasks: Annotated[list[Path], typer.Argument(help="Harbor task folders.", exists=True)],
    agent: Annotated[
        str, typer.Option("--agent", "-a", help="oracle | nop | module:Class")
    ] = "oracle",
    backend: BackendOpt = "podman",
    concurrency: Annotated[int, typer.Option("--concurrency", "-n")] = 2,
    harbor_env: HarborEnvOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run real Harbor trials of TASKS and print one result per task."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.trials.trial import run_trials

    skipped = [t for t in tasks if not (t / "task.toml").is_file()]
    for path in skipped:
        console.print(f"  [yellow]skipping {path}: not a Harbor task folder (no task.toml)[/]")
    tasks = [t for t in tasks if t not in skipped]
    if not tasks:
        raise typer.BadParameter("no Harbor task folders given")

    with TaskProgress("trials", total=len(tasks), quiet=as_json, console=console) as bar:

        def progress(outcome) -> None:  # noqa: ANN001
            mark = "[red]error[/]" if outcome.error else f"reward {outcome.reward}"
            bar.advance(status=outcome.task_name)
            if not as_json:
                bar.print(f"  {outcome.task_name}: {mark} ({outcome.duration_sec:.1f} s)")

        outcomes = asyncio.run(
            run_trials(
                tasks,
                agent=agent,
                backend=backend,
                concurrency=concurrency,
                on_done=progress,
                environment_options=json.loads(harbor_env.read_text()) if harbor_env else None,
            )
        )
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.trials.faults import trial_failure

    # The task's own solution (or nothing) ran: past the agent's limits is the task's fault.
    actor = "reference" if agent in ("oracle", "nop") else "policy"
    failures = [trial_failure(o, actor=actor) for o in outcomes]
    if as_json:
        rows = [
            o.model_dump(mode="json") | {"fault": f.fault if f else None}
            for o, f in zip(outcomes, failures, strict=True)
        ]
        typer.echo(json.dumps(rows, indent=2))
    else:
        table = Table("task", "reward", "error", "seconds")
        for o, f in zip(outcomes, failures, strict=True):
            table.add_row(
                o.task_name,
                "-" if o.reward is None else f"{o.reward:g}",
                (f"{f.fault}: " if f else "") + (o.error or "")[:80],
                f"{o.duration_sec:.1f}",
            )
        Console().print(table)
    raise typer.Exit(exit_code_for(f.fault for f in failures if f is not None))


@app.command()
def solve(
    tasks: Annotated[list[Path], typer.Argument(help="Harbor task folders.", exists=True)],
    model: ModelOpt = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint")] = None,
    attempts: Annotated[int, typer.Option("--attempts", "-k")] = 1,
    max_turns: Annotated[
        int, typer.Option(help="Model calls per attempt (the flywheel's --solver-max-turns)")
    ] = SOLVER_MAX_TURNS,
    store: Annotated[
        str, typer.Option(help="Rollout store: a SQLite file, or a postgresql:// URL")
    ] = "rollouts.db",
    backend: BackendOpt = "podman",
    as_json: JsonOpt = False,
) -> None:
    """Let the solver attempt TASKS in real Harbor trials; every attempt goes to the store."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..graphs.agent.loop import LoopBudget
    from ..graphs.models import ModelConfig
    from ..graphs.solver.attempt import SolverSettings, solve_task
    from ..tools.sandbox.harbor_backends import HarborBackendError, check_stages

    try:  # our solver attaches to the sandbox: refuse a backend without one before a model starts
        check_stages(backend, ["solve"])
    except HarborBackendError as exc:
        raise typer.BadParameter(str(exc), param_hint="--backend") from None

    async def run_all(bar: TaskProgress):  # noqa: ANN202
        results = []
        for task in tasks:
            for sample in range(attempts):
                bar.status(f"{task.name} #{sample}")
                result = await solve_task(task, settings, sample=sample, backend=backend)
                bar.advance()
                if not as_json:
                    bar.print(
                        f"  {task.name} #{sample}: reward {result.reward} "
                        f"({result.outcome}, {result.steps} tool calls)"
                    )
                results.append(result)
        return results

    total = len(tasks) * attempts
    with model_or_embedded(model, base_url, console) as resolved:
        settings = SolverSettings(
            model=ModelConfig(
                model=resolved.model, base_url=resolved.base_url, tool_choice=resolved.tool_choice
            ),
            budget=LoopBudget(max_turns=max_turns),
            store_path=str(store),
            run_id="cli",
        )
        if not as_json:
            console.print(f"solver model: {resolved.label}")
        with TaskProgress("solve", total=total, quiet=as_json, console=console) as bar:
            results = asyncio.run(run_all(bar))
    if as_json:
        rows = [r.model_dump(mode="json") | {"model": resolved.label} for r in results]
        typer.echo(json.dumps(rows, indent=2))
    # An attempt that errored has no reward (`fault` says whose): the command did not do its work.
    raise typer.Exit(exit_code_for(r.fault for r in results if r.outcome == "error"))


@app.command()
def doctor(
    as_json: JsonOpt = False,
    clean: Annotated[
        bool, typer.Option(help="Remove containers and scratch left by crashed runs")
    ] = False,
    server: Annotated[
        bool,
        typer.Option(help="Also start the embedded policy server and chat with it (seconds)"),
    ] = True,
) -> None:
    """Say which sandbox backends work on this machine, and why not for the others; check that
    the embedded policy server answers a chat with tools on this CPU."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.sandbox.doctor import BackendStatus, clean_docker, diagnose

    if clean:
        for line in clean_docker():
            console.print(line)
        # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
        from ..tools.gate.harness import SCRATCH_PREFIX
        from ..tools.scratch import sweep_scratch

        gone = sweep_scratch(SCRATCH_PREFIX) + sweep_scratch("aes-trials-")
        console.print(f"gate: removed {len(gone)} trial folder(s) of killed processes")

    statuses = asyncio.run(diagnose())
    if server:
        # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
        from ..training.serving.server_check import check_embedded_server

        check = check_embedded_server()
        detail = check.detail
        if check.system_info:
            detail += f"\nllama.cpp: {check.system_info}"
        if check.cpu:
            detail += f"\nCPU: {check.cpu}"
        statuses.append(BackendStatus(name="policy server (embedded)", ok=check.ok, detail=detail))
    if as_json:
        typer.echo(json.dumps([s.model_dump() for s in statuses], indent=2))
        return
    table = Table("backend", "works", "detail")
    for s in statuses:
        table.add_row(s.name, "[green]yes[/]" if s.ok else "[red]no[/]", s.detail)
    Console().print(table)


@app.command("chat-template")
def chat_template(
    out: Annotated[
        Path | None,
        typer.Argument(help="Write the template here (for `vllm serve --chat-template OUT`)."),
    ] = None,
) -> None:
    """The policy's chat format: the tool template the trainer tokenizes with and the embedded
    server renders with, for a model whose own template has no tools (SmolLM2...)."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..training.chat_format import tool_chat_template, write_tool_template

    if out is None:
        typer.echo(tool_chat_template(), nl=False)
        return
    console.print(f"wrote {write_tool_template(out)}")


#: Harbor logs this at ERROR for every trial whose agent has no web tools to switch off (ours,
#: oracle and nop never have any; the sandbox has no network anyway): noise, not an error.
_HARBOR_NOISE = ("exposes no native web search or fetch tools",)


class HarborLogFilter(logging.Filter):
    """The one place Harbor's console output is filtered: its known noise always, and (unless
    --verbose) its below-WARNING chatter from the per-trial loggers it pins at DEBUG."""

    def __init__(self, verbose: bool) -> None:
        super().__init__()
        self.verbose = verbose

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith("harbor"):
            return True
        if any(noise in str(record.msg) for noise in _HARBOR_NOISE):
            return False
        return self.verbose or record.levelno >= logging.WARNING


@app.callback()
def main(verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, HarborLogFilter) for f in handler.filters):
            handler.addFilter(HarborLogFilter(verbose))


_mount_subapps()

if __name__ == "__main__":
    app()
