"""`autoenvscaling import DATASET`: a Terminal-Bench 2 / Harbor dataset folder in, a report out.

Per task: the lint verdict, the kind of "no" (task_wrong, cannot_run_here with what is missing
and how to provide it), whether an RL policy could forge its reward, and with `--rewrite OUT` what
was changed mechanically in a copy under OUT (tools/gate/import_rewrite.py). Nothing is built
unless `--gate` runs the real admission gate on each task (or its rewritten copy).

Exit status (cli/exit_codes.py): 0 when nothing stands in any task's way, 1 when a task is wrong,
4 when one cannot run on this machine, 3 when the gate itself failed on one (--gate only); of
several, 3 over 4 over 1 (`exit_code_for_kinds`); 2 for a usage error.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .exit_codes import ExitCode, exit_code_for_kinds
from .options import BackendOpt
from .progress import TaskProgress

if TYPE_CHECKING:
    from ..tools.gate.importer import ImportedTask, ImportReport

import_app = typer.Typer(no_args_is_help=True)
console = Console(stderr=True)


@import_app.command("import")
def import_dataset_command(
    dataset: Annotated[
        Path,
        typer.Argument(
            help="A TB2-format dataset: a folder of task folders (task.toml, instruction.md, "
            "environment/, tests/).",
            exists=True,
            file_okay=False,
        ),
    ],
    backend: BackendOpt = "podman",
    allow_internet: Annotated[
        bool,
        typer.Option(
            "--allow-internet",
            help="Judge as a gate run with --allow-internet would: a task that declares the "
            "internet is not missing it, and a registry may serve its base image.",
        ),
    ] = False,
    rewrite: Annotated[
        Path | None,
        typer.Option(
            "--rewrite",
            help="Write a copy of each task here with the mechanical rewrites applied (CMD "
            "removed, CRLF scripts, `cd /tests` before the runner), and report each change.",
            file_okay=False,
        ),
    ] = None,
    gate: Annotated[
        bool,
        typer.Option(
            "--gate",
            help="Also run the real admission gate (builds and trials; minutes per task) on "
            "each task, or its rewritten copy.",
        ),
    ] = False,
    engine: Annotated[
        bool,
        typer.Option(
            "--engine/--no-engine",
            help="Ask the engine which base images it holds (default); --no-engine judges by "
            "the offline bases a fresh machine of this project has (`make bases`).",
        ),
    ] = True,
    report: Annotated[
        Path | None,
        typer.Option("--report", help="Write the report as JSON to this file.", dir_okay=False),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Report what the gate would say of every task of DATASET, before building anything."""
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..tools.gate.import_rewrite import rewrite_task
    from ..tools.gate.importer import find_tasks, import_dataset, import_task

    dataset = dataset.resolve()
    if rewrite is not None:
        rewrite = rewrite.resolve()
        if rewrite == dataset or rewrite.is_relative_to(dataset):
            raise typer.BadParameter(
                "--rewrite must lie outside the dataset (its copies would be read as tasks)"
            )
    total = len(find_tasks(dataset))
    with TaskProgress("import", total=total, quiet=as_json, console=console) as bar:

        def on_task(row: ImportedTask) -> None:
            bar.advance()
            bar.status(row.task)

        try:
            result = import_dataset(
                dataset,
                backend=backend,
                allow_internet=allow_internet,
                ask_engine=engine,
                on_task=on_task,
            )
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
    if rewrite is not None:
        # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
        from ..tools.gate.importer import BaseImages
        from ..tools.gate.lint import lint_task

        bases = BaseImages(backend, ask_engine=engine)
        for row in result.tasks:
            source = dataset / row.task
            copy = rewrite / row.task
            row.rewritten = rewrite_task(source, copy, lint_task(source, backend=backend))
            again = import_task(copy, rewrite, bases, allow_internet=allow_internet)
            row.after_rewrite = again.kind
    if gate:
        _run_gate(result, dataset, rewrite, backend, allow_internet)
    if report is not None:
        report.write_text(result.model_dump_json(indent=2))
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    else:
        _print(result, rewrite is not None)
    code = exit_code_for_kinds(row.final_kind() for row in result.tasks)
    if code != ExitCode.OK:
        raise typer.Exit(code)


def _run_gate(
    result: ImportReport, dataset: Path, rewrite: Path | None, backend: str, allow: bool
) -> None:
    # lazy: only this command loads it; the CLI's start (--help, the MCP servers) stays light
    from ..graphs.validation.builder import validate_batch
    from ..tools.gate import GateConfig
    from ..tools.gate.importer import GateResult

    folders = [(rewrite or dataset) / row.task for row in result.tasks]
    config = GateConfig(backend=backend, allow_internet=allow)
    verdicts = asyncio.run(validate_batch(folders, config))
    by_task = {Path(v.task): v for v in verdicts}
    for row, folder in zip(result.tasks, folders, strict=True):
        verdict = by_task.get(folder)
        if verdict is not None:
            row.gate = GateResult(
                admitted=verdict.admitted,
                kind=verdict.kind,
                stage=verdict.stage,
                reason=verdict.reason,
                missing=verdict.missing,
            )


def _print(result: ImportReport, rewritten: bool) -> None:
    table = Table("task", "lint", "verdict", "missing / first error", "forgeable")
    for row in result.tasks:
        verdict = row.verdict()
        if row.gate is not None:
            verdict += f"; gate: {row.gate.kind or 'admitted'}"
        detail = row.missing_line() if row.missing else (row.errors[0] if row.errors else "")
        routes = sorted({r.route for r in row.forge_routes})
        table.add_row(
            escape(row.task),
            "ok" if row.lint_ok else f"{len(row.errors)} error(s)",
            escape(verdict),
            escape(detail[:160]),
            escape(", ".join(routes) if routes else "no"),
        )
    Console().print(table)
    counts = result.counts
    Console().print(
        f"{counts['tasks']} tasks: {counts['lint_ok']} pass lint; {counts['ready']} ready for "
        f"the gate, {counts['task_wrong']} task wrong, {counts['cannot_run_here']} cannot run "
        f"here; {counts['forgeable']} forgeable ({counts['forgeable_if_separate']} even with a "
        "separate verifier)"
        + ("" if result.engine_asked else "; base images judged by the offline bases (no engine)")
    )
    if rewritten:
        for row in result.tasks:
            for change in row.rewritten:
                Console().print(
                    f"rewrote {escape(row.task)}/{escape(change.file)}: {escape(change.what)}"
                )
