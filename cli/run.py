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
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from ..graphs.config import FlywheelContext, RunConfig
from .config_options import with_config_options
from .exit_codes import ExitCode, exit_code_for
from .options import JsonOpt
from .progress import TaskProgress

if TYPE_CHECKING:
    from ..graphs.flywheel_state import TrainingSummary
    from ..graphs.policy_servers import PolicyServers
    from ..tools.report.metrics import CandidateRecord, RoundMetrics
    from ..tools.trials.faults import Fault

run_app = typer.Typer()
console = Console(stderr=True)
THREAD = "flywheel"


async def _stream(
    graph: Any, payload: Any, config: dict[str, Any], ctx: Any, auto_yes: bool, bar: Any
) -> None:
    from langgraph.types import Command

    started = time.monotonic()
    while True:
        interrupted = None
        # "sync": each step's checkpoint is on disk before the next step starts, so a kill
        # loses at most the step in flight (the default "async" may lose several).
        async for chunk in graph.astream(
            payload, config, context=ctx, stream_mode="updates", durability="sync"
        ):
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


@asynccontextmanager
async def _saver(graph_db: Path | str) -> AsyncIterator[Any]:
    """The run's checkpointer (graph.sqlite, or a postgresql:// URL), restoring the flywheel
    state's models."""
    from ..graphs.checkpointer import open_saver
    from ..graphs.flywheel import checkpoint_serde

    async with open_saver(graph_db, checkpoint_serde()) as saver:
        yield saver


async def _checkpointed(graph_db: Path | str, thread: str = THREAD) -> bool:
    """Whether the run's graph database holds a checkpoint of its thread (a run that really
    started)."""
    from ..tools.rollouts.postgres import is_postgres_url, redacted

    on_postgres = is_postgres_url(str(graph_db))
    if not on_postgres and not Path(graph_db).is_file():
        return False
    name = redacted(str(graph_db)) if on_postgres else str(graph_db)
    try:
        async with _saver(graph_db) as saver:
            return await saver.aget_tuple({"configurable": {"thread_id": thread}}) is not None
    except Exception as exc:  # noqa: BLE001 - a torn or foreign file: say so plainly
        if on_postgres:
            raise typer.BadParameter(
                f"the checkpointer at {name} cannot be read ({exc})", param_hint="--store"
            ) from None
        raise typer.BadParameter(
            f"{graph_db} cannot be read as a run's checkpoint database ({exc}); move it away "
            "to start the run over",
            param_hint="--run-dir",
        ) from None


async def _continue(graph: Any, config: dict[str, Any], rounds: int) -> bool:
    """Prepare a resume. A finished run asked for more rounds goes on to the next round;
    False when there is nothing left to do."""
    snapshot = await graph.aget_state(config)
    if snapshot.next or snapshot.tasks:
        return True  # stopped mid-round: the checkpoint knows where to go on
    done = int(snapshot.values.get("round", 1)) - 1
    if rounds <= done:
        console.print(
            f"the run already finished {done} round(s); pass --rounds N with N > {done} to run more"
        )
        return False
    console.print(f"the run finished {done} round(s): continuing with rounds {done + 1}..{rounds}")
    # Re-enter the loop where a round starts (setup -> inspect), asking for the new total.
    await graph.aupdate_state(config, {"rounds": rounds}, as_node="setup")
    return True


def run_summary(
    run_dir: Path, error: str | None = None, error_fault: Fault | None = None
) -> dict[str, Any]:
    """What `run --json` prints: the run's folder and id, each finished round's metrics (as
    metrics.json holds them), the attempts that errored by role and fault (from the store: an
    attempt's `fault` metadata; a gate that could not judge a candidate is infrastructure), the
    run report's path, the error that stopped the run (or None; `error_fault` says whose fault
    it was: an infrastructure stop, the policy server lost, is 3), and the exit status they give."""
    from ..tools.report.run_report import load_history
    from ..tools.rollouts.store import RolloutStore
    from ..tools.run_dir import RunDir

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
    from ..graphs.flywheel import build_flywheel

    values = dict(config_values)  # the settings given (None: not given), by field name
    if preset_name:
        from ..graphs.config import given_over_preset

        try:
            values = given_over_preset(values, preset_name)
        except KeyError as exc:
            raise typer.BadParameter(str(exc.args[0]), param_hint="--preset") from None
    rounds: int = values["rounds"]
    run_dir: Path | None = values["run_dir"]
    human_review: bool = values["human_review"]
    if run_dir is None:
        if resume:
            raise typer.BadParameter("--resume needs the --run-dir of the run to continue")
        run_dir = Path("runs") / time.strftime("run-%Y%m%d-%H%M%S")
    run_dir = run_dir.resolve()
    from ..graphs.checkpointer import run_thread
    from ..tools.rollouts.postgres import is_postgres_url
    from ..tools.run_dir import RunDir

    store: str | None = values.get("store")
    if store is not None and not is_postgres_url(store):
        raise typer.BadParameter(
            "takes a postgresql:// URL (the SQLite default lives in the run folder)",
            param_hint="--store",
        )
    # A run on PostgreSQL names its database in store.json: a resume finds it without --store.
    store = store or (RunDir(run_dir).store if RunDir(run_dir).on_postgres else None)
    values["store"] = store
    # The checkpoints: graph.sqlite in the folder, or the run's thread in the PostgreSQL store.
    graph_db: Path | str = store or run_dir / "graph.sqlite"
    thread = run_thread(run_dir, str(graph_db))
    # A run killed before its first checkpoint left a graph.sqlite with nothing in it: such a
    # folder starts over (every step before the first checkpoint is idempotent).
    started = asyncio.run(_checkpointed(graph_db, thread))
    if started and not resume:
        raise typer.BadParameter(
            f"{run_dir} already holds a run"
            + (f" (thread {thread} of the --store database)" if store else "")
            + ": pass --resume to continue it, or choose another --run-dir",
            param_hint="--run-dir",
        )
    begun = started if store else Path(graph_db).exists()
    if resume and not begun:
        raise typer.BadParameter(f"nothing to resume in {run_dir}", param_hint="--run-dir")
    if begun and not started:
        console.print(
            f"{run_dir} holds a run stopped before its first checkpoint: starting it from the "
            "beginning (the pool and the rollouts written so far are kept)"
        )
        resume = False
    run_dir.mkdir(parents=True, exist_ok=True)
    from ..tools.gate.harness import SCRATCH_PREFIX
    from ..tools.scratch import sweep_scratch

    for name in sweep_scratch(SCRATCH_PREFIX):  # trial folders of a gate that was killed
        console.print(f"removed {name} (left by a gate that was killed)")
    if (run_dir / "pool").is_dir():  # half-copied tasks of a killed run
        from ..tools.tasks.pool import Pool

        for name in Pool(run_dir / "pool").sweep():
            console.print(f"removed {name} (a copy a killed run left unfinished)")
    values["run_dir"] = str(run_dir)
    values["heldout_dir"] = str(values["heldout_dir"]) if values["heldout_dir"] else None
    if values.get("proposer_heldout_dir"):
        values["proposer_heldout_dir"] = str(values["proposer_heldout_dir"])
    values["decontam_dirs"] = [str(p.resolve()) for p in values["decontam_dirs"] or []]
    values["seed_dir"] = str(values["seed_dir"]) if values["seed_dir"] else None
    # Who serves the policy: one rule for the command line and Studio (graphs/config.py).
    values["policy_server"] = RunConfig.from_values(values).policy_server
    embedded = RunConfig.from_values(values).embedded_default()

    async def main() -> None:
        from ..graphs.policy_servers import PolicyServers

        # The run owns its policy servers: they stop when it ends, crash or Ctrl-C included;
        # a server that crashed for good stops the run at once (PolicyServerCrashed: exit 3).
        async with PolicyServers() as servers:
            servers.notify = lambda text: console.print(text, style="yellow", markup=False)
            await servers.supervise(work(servers))

    async def work(servers: PolicyServers) -> None:
        from ..graphs.flywheel_roles import embedded_defaults
        from ..training.backend import TrainingError

        if embedded:
            for key, value in (await embedded_defaults(servers, console)).items():
                if values.get(key) is None:  # the command line wins over the defaults
                    values[key] = value
        asked = values.get("cold_start")
        if asked is None:  # default: on for the embedded policy when the run trains
            values["cold_start"] = embedded and values.get("train") is not False and not resume
        if values["cold_start"] and not resume:
            try:
                values.update(await _cold_start(values, run_dir, embedded, servers))
            except TrainingError as exc:
                if asked:  # asked for on the command line: no silent fallback
                    raise
                console.print(f"[yellow]cold start: not built ({exc}); the base policy runs[/]")
                values["cold_start"] = False
        ctx = FlywheelContext.from_values(values).with_servers(servers)
        async with _saver(graph_db) as saver:
            graph = build_flywheel(checkpointer=saver)
            config = {"configurable": {"thread_id": thread}, "recursion_limit": 10_000}
            if resume:  # the server is new: load the policy the saved state names
                from ..graphs.flywheel_roles import rebind_policy
                from ..tools.run_dir import RunDir

                saved = await graph.aget_state(config)
                name = await rebind_policy(ctx, RunDir(run_dir), saved.values.get("policy"))
                if name:
                    console.print(f"resume: the policy server loaded {name} again")
            payload = None if resume else {"rounds": rounds}
            if resume and not await _continue(graph, config, rounds):
                return
            # A review prompt cannot share the terminal with a live bar: no bar then.
            quiet = (human_review and not yes) or as_json
            with TaskProgress("rounds", total=rounds, quiet=quiet, console=console) as bar:
                await _stream(graph, payload, config, ctx, yes, bar)

    import click

    from ..training.serving.supervision import PolicyServerCrashed

    failed: str | None = None
    fault: Fault | None = None  # whose fault the error that stopped the run is (None: the work's)
    interrupted = False
    try:
        asyncio.run(main())
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
    from ..tools.report.run_report import write_run_report

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


async def _cold_start(
    values: dict[str, Any], run_dir: Path, embedded: bool, servers: PolicyServers
) -> dict[str, Any]:
    """Build (once per machine) and serve the cold-start checkpoint; the values that name it for
    both roles. Its card (what it holds, what it cost) is copied into the run folder."""
    from ..graphs.cold_start import (
        adopt_cold_start,
        cold_start_checkpoint,
        cold_start_splits,
        settings_for,
    )
    from ..graphs.flywheel import REPO_SEED
    from ..graphs.models import Policy

    if not values.get("base_model"):
        raise typer.BadParameter("--cold-start needs the policy's HF weights (--base-model)")
    config = RunConfig.from_values(values)
    server = servers.for_config(config)
    if server is None:
        raise typer.BadParameter("--cold-start needs a policy server that swaps checkpoints")
    if embedded:
        from ..training.serving.embedded_setup import embedded_cache_dir

        cache = embedded_cache_dir() / "cold-start"
    else:
        cache = run_dir / "cold-start"
    try:  # its own tasks: never the pool's seed or the held-out set (graphs/cold_start.py)
        tasks, splits = cold_start_splits(
            values.get("cold_start_tasks"), values.get("seed_dir") or REPO_SEED, config.heldout_dir
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--cold-start-tasks") from None
    started = time.monotonic()
    checkpoint, card = await cold_start_checkpoint(
        cache,
        base_model=values["base_model"],
        tasks_dir=Path(tasks),
        settings=settings_for(config),
        backend=values.get("backend"),
        progress=console.print,
        splits=splits,
    )
    (run_dir / "cold-start-card.json").write_text(card.model_dump_json(indent=2))
    current = Policy.serving(
        config.policy_model, config.policy_base_url, config.policy_tool_choice, None
    )
    policy = await adopt_cold_start(checkpoint, run_dir / "checkpoints", server, current)
    console.print(
        f"  cold start: serving {checkpoint.id} to both roles "
        f"({time.monotonic() - started:.0f} s here; card: {run_dir / 'cold-start-card.json'})"
    )
    return {
        "policy_model": policy.model,
        "policy_base_url": policy.base_url,
        "policy_checkpoint_id": checkpoint.id,
        "cold_start_tasks": str(tasks),
    }


@run_app.command()
def report(
    run_dir: Annotated[Path, typer.Argument(help="Run folder", exists=True, file_okay=False)],
) -> None:
    """Write RUN_DIR/reports/run.md and PNG plots from the run's recorded metrics."""
    from ..tools.report.run_report import write_run_report

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
