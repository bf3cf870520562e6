"""`autoenvscaling run` (the main job) and `autoenvscaling report`.

With no model options, the run uses the embedded default: SmolLM2-135M-Instruct served on
127.0.0.1 by a local OpenAI-compatible server (started here, stopped on exit or crash), podman
sandboxes, SQLite, and TRL GRPO on CPU with LoRA; the same code paths as a vLLM deployment.

Exit status (cli/exit_codes.py): 0 when the run finished and no attempt errored, 1 when the run
stopped on an error or an attempt errored through its task's fault, 3 when an attempt (or a gate
judgement) was lost to infrastructure or the policy server crashed again after its one restart
(the run stops at once, naming the signal and the server log's tail), 2 for a usage error. `--json` prints the run's summary
(`run_summary`) on stdout, whatever the status.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import click
import typer
from rich.console import Console

from ..graphs.config import RunConfig, given_over_preset
from ..tools.rollouts.store import RolloutStore
from ..tools.run_dir import RunDir
from ..training.serving.supervision import PolicyServerCrashed
from .config_options import with_config_options
from .exit_codes import ExitCode, exit_code_for
from .options import JsonOpt
from .progress import TaskProgress

if TYPE_CHECKING:
    from ..graphs.flywheel.state import TrainingSummary
    from ..graphs.lifecycle import OpenRun, RunSetupError
    from ..tools.report.metrics import CandidateRecord, RoundMetrics
    from ..tools.trials.faults import Fault

run_app = typer.Typer()
console = Console(stderr=True)


def _say(text: str) -> None:
    """What the run says as it opens (graphs/lifecycle.py), on the console, as written."""
    console.print(text, markup=False, highlight=False)


def _usage_error(exc: RunSetupError) -> typer.BadParameter:
    """A setting the run cannot open with, as the command line names it."""
    hint = f"--{exc.setting.replace('_', '-')}" if exc.setting else None
    return typer.BadParameter(str(exc), param_hint=hint)


async def _stream(opened: OpenRun, auto_yes: bool, bar: Any) -> None:
    """Stream the run's updates to the console, one line per node; at a review interrupt, ask
    which admitted tasks to veto (or keep them all with --yes) and go on."""
    started = time.monotonic()
    from langgraph.types import Command  # lazy: LangGraph takes ~1.7 s; `--help` and `mcp` skip it

    payload = opened.payload
    while True:
        interrupted = None
        async for chunk in opened.astream(payload):
            # Writes of tasks that finished before a kill are replayed on resume, marked cached.
            replayed = bool((chunk.get("__metadata__") or {}).get("cached"))
            for node, update in chunk.items():
                if node == "__interrupt__":
                    interrupted = update[0].value
                    continue
                if node.startswith("__"):  # e.g. __metadata__ of writes replayed on resume
                    continue
                elapsed = time.monotonic() - started
                detail = ""
                if node == "admit_one" and isinstance(update, dict) and update.get("candidates"):
                    c: CandidateRecord = update["candidates"][0]
                    detail = "admitted" if c.admitted else f"rejected at {c.stage}: {c.reason[:90]}"
                    detail = f"slot {c.slot} rev {c.revision}: {detail}"
                elif node == "refresh" and isinstance(update, dict) and update.get("metrics"):
                    m: RoundMetrics = update["metrics"][0]
                    mean = m.solver_mean_reward_pool
                    detail = (
                        f"round {m.round} done: {m.admitted}/{m.scored} admitted, "
                        f"solver mean on pool {'n/a' if mean is None else f'{mean:.3g}'}"
                    )
                elif node == "train" and isinstance(update, dict):
                    t: TrainingSummary | None = update.get("training")
                    detail = t.headline() if t else ""
                if replayed:
                    detail = f"{detail} (from the checkpoint)".lstrip()
                bar.print(f"[{elapsed:7.1f}s] {node} {detail}")
                bar.status(node)
                if node == "refresh":  # the last node of a round
                    bar.advance()
        if interrupted is None:
            return
        console.print_json(json.dumps(interrupted))
        vetoed: list[str] = []
        if not auto_yes:
            answer = typer.prompt("task ids to veto (comma separated, empty keeps all)", default="")
            vetoed = [t.strip() for t in answer.split(",") if t.strip()]
        payload = Command(resume=vetoed)


def run_summary(
    run_dir: Path, error: str | None = None, error_fault: Fault | None = None
) -> dict[str, Any]:
    """What `run --json` prints: the run's folder and id, each finished round's metrics (as
    metrics.json holds them), the attempts that errored by role and fault (from the store: an
    attempt's `fault` metadata; a gate that could not judge a candidate is infrastructure), the
    run report's path, the error that stopped the run (or None; `error_fault` says whose fault
    it was: an infrastructure stop, the policy server lost, is 3), and the exit status they give."""
    from ..tools.report.run_report import load_history  # lazy: matplotlib's ~2 s, for `--help` too

    run = RunDir(run_dir)
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    run_id = manifest.get("run_id")
    history = load_history(run.reports)
    errored: dict[str, dict[str, int]] = {}
    faults: list[Any] = []
    if run_id and run.has_store:
        with RolloutStore(run.store) as store:
            attempts = store.list_attempts(run_id=run_id, outcome="error", limit=1_000_000)
        for attempt in attempts:
            fault = attempt.metadata.get("fault") or "infrastructure"
            faults.append(fault)
            by_fault = errored.setdefault(attempt.role, {})
            by_fault[fault] = by_fault.get(fault, 0) + 1
    unjudged = sum(m.infrastructure_failures for m in history)
    if unjudged:
        errored["gate"] = {"infrastructure": unjudged}
        faults += ["infrastructure"] * unjudged
    report = run.reports / "run.md"
    code = exit_code_for([error_fault]) if error else exit_code_for(faults)
    return {
        "run_dir": str(run_dir),
        "run_id": run_id,
        "rounds_done": len(history),
        "rounds": [m.model_dump(mode="json") for m in history],
        "errored": errored,
        "report": str(report) if report.is_file() else None,
        "error": error,
        "exit_code": int(code),
    }


@run_app.command()
@with_config_options
def run(
    resume: Annotated[
        bool, typer.Option(help="Continue a killed or paused run in RUN_DIR")
    ] = False,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Keep all admissions without asking")
    ] = False,
    as_json: JsonOpt = False,
    preset_name: Annotated[
        str | None,
        typer.Option(
            "--preset",
            help="Start from a preset's settings (graphs/config.py PRESETS; e.g. learn: the "
            "learning demonstration); options given on the command line win",
        ),
    ] = None,
    *,
    config_values: dict[str, Any],
) -> None:
    """Run the flywheel: propose, admit, train, swap, refresh. Resumable with --resume.

    Exit status: 0 the run finished and no attempt errored; 1 the run stopped on an error, or an
    attempt errored through its task's fault; 3 an attempt was lost to infrastructure."""
    values = dict(config_values)  # the settings given (None: not given), by field name
    if preset_name:
        try:
            values = given_over_preset(values, preset_name)
        except KeyError as exc:
            raise typer.BadParameter(str(exc.args[0]), param_hint="--preset") from None
    # lazy: the graphs import LangGraph, Harbor and the trainers' glue (~5 s): every other
    # command, `--help` and the MCP servers' start go without
    from ..graphs.lifecycle import RunSetupError, open_run, plan_run, run_values
    from ..tools.report.run_report import write_run_report

    human_review: bool = values["human_review"]
    try:
        plan = asyncio.run(plan_run(values, resume=resume))
    except RunSetupError as exc:
        raise _usage_error(exc) from None
    run_dir = plan.run_dir
    values["run_dir"] = run_dir
    embedded = RunConfig.from_values(run_values(values, plan)).embedded_default()

    async def main() -> None:
        async with open_run(values, resume=resume, notify=_say, plan=plan) as opened:
            if opened.finished:
                return
            # A review prompt cannot share the terminal with a live bar: no bar then.
            quiet = (human_review and not yes) or as_json
            rounds = opened.context.rounds
            with TaskProgress("rounds", total=rounds, quiet=quiet, console=console) as bar:
                await opened.supervise(_stream(opened, yes, bar))

    failed: str | None = None
    fault: Fault | None = None  # whose fault the error that stopped the run is (None: the work's)
    interrupted = False
    try:
        asyncio.run(main())
    except RunSetupError as exc:
        raise _usage_error(exc) from None
    except (click.exceptions.ClickException, click.exceptions.Exit):
        raise  # a usage error (2) or an exit already decided
    except KeyboardInterrupt:  # Ctrl-C: the steps that finished are checkpointed
        failed, interrupted = "interrupted (Ctrl-C)", True
        console.print(
            "[yellow]the run stopped: interrupted[/]\n"
            f"resume with: autoenvscaling run --resume --run-dir {run_dir}"
        )
    except PolicyServerCrashed as exc:  # infrastructure: 3, with the signal and the log's tail
        failed, fault = f"{type(exc).__name__}: {exc}", "infrastructure"
        console.print(
            f"[red]the run stopped: its policy server crashed again[/]: {exc}\n"
            f"resume with: autoenvscaling run --resume --run-dir {run_dir}"
        )
    except Exception as exc:  # noqa: BLE001 - the run failed: say why, then the summary and 1
        console.print_exception(show_locals=False)
        failed = f"{type(exc).__name__}: {exc}"
        console.print(f"[red]the run failed[/]: {failed}")
    try:
        path = write_run_report(run_dir, embedded=embedded)
        console.print(f"report: {path}")
        if not as_json:
            console.print((run_dir / "reports").joinpath(path.name).read_text()[:3000])
    except FileNotFoundError as exc:
        console.print(f"[yellow]{exc}[/]")
    summary = run_summary(run_dir, failed, fault)
    if interrupted:
        summary["exit_code"] = int(ExitCode.INTERRUPTED)
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    elif summary["errored"]:
        console.print(f"[yellow]attempts that errored, by role and fault: {summary['errored']}[/]")
    raise typer.Exit(summary["exit_code"])


@run_app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="Run folder", exists=True, file_okay=False)],
) -> None:
    """Write RUN_DIR/reports/run.md and PNG plots from the run's recorded metrics."""
    from ..tools.report.run_report import write_run_report  # lazy: matplotlib's ~2 s

    manifest = (
        json.loads((run_dir / "manifest.json").read_text())
        if (run_dir / "manifest.json").exists()
        else {}
    )
    embedded = manifest.get("config", {}).get("policy_server") == "embedded"
    try:
        path = write_run_report(run_dir, embedded=embedded)
    except FileNotFoundError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(path.read_text())
    console.print(f"written: {path} and plots in {path.parent}")
