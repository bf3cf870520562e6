"""A benchmark folder in, a report out: what the gate would say of each task before anything builds.

`autoenvscaling import DIR` (cli/import_tasks.py) reads a Terminal-Bench 2 / Harbor dataset (every
folder below DIR that holds a task.toml) and answers per task, statically:

- lint: the gate's own static stage (`lint_task`), errors and warnings by rule;
- kind of "no" (tools/gate/kinds.py): `task_wrong` when lint finds an error of the task's own;
  `cannot_run_here` when only what this machine lacks stands in the way — a base image the
  engine does not hold (asked of the engine; the offline bases when none answers), the internet
  the build, verifier or solution fetch from, GPUs or compose the backend cannot honour — each
  `Missing` with how to provide it; None when nothing static stands in the way (the gate's
  trials still decide);
- forgeable (tools/gate/forgeability.py): whether the verifier runs the agent's code where it
  can write the reward, each route with its line and what to change.

Nothing here builds an image or starts a container: an imported task is an author's, and for it
a missing base or network is "cannot run here", never the task's fault (a proposer, briefed on
both, is scored otherwise: `gpu.scored_for_proposer`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

from pydantic import BaseModel, Field, computed_field

from ..sandbox.engine import client
from ..sandbox.harbor_backends import our_engine
from ..sandbox.image_tags import image_id, parent_images
from .forgeability import ForgeRoute, forgeability
from .kinds import (
    Kind,
    Missing,
    lint_missing,
    missing_base_images,
    missing_network,
)
from .lint import LintReport, lint_task
from .lint.dockerfile_rules import OFFLINE_BASES


class Change(BaseModel):
    """One mechanical rewrite of an imported task (import --rewrite)."""

    file: str = Field(description="path relative to the task folder")
    rule: str = Field(description="the lint finding it answers")
    what: str


class GateResult(BaseModel):
    """The real gate's verdict on the task (import --gate), trials and all."""

    admitted: bool
    kind: Kind | None
    stage: str | None
    reason: str
    missing: list[Missing] = Field(default_factory=list)


class ImportedTask(BaseModel):
    task: str = Field(description="path relative to the dataset folder")
    lint_ok: bool
    errors: list[str] = Field(default_factory=list, description="lint errors, one line each")
    warnings: dict[str, int] = Field(default_factory=dict, description="lint warnings by rule")
    kind: Kind | None = Field(
        default=None,
        description="task_wrong (a lint error of its own), cannot_run_here (see `missing`), "
        "None: nothing static stands in the way (the gate's trials still decide)",
    )
    missing: list[Missing] = Field(default_factory=list)
    forgeable: bool = False
    forgeable_if_separate: bool = Field(
        default=False, description="still forgeable with the tests in a fresh container"
    )
    forge_routes: list[ForgeRoute] = Field(default_factory=list)
    rewritten: list[Change] = Field(
        default_factory=list, description="what --rewrite changed in its copy"
    )
    after_rewrite: Kind | None | str = Field(
        default="not rewritten",
        description="the copy's kind after --rewrite (None: nothing static in the way)",
    )
    gate: GateResult | None = Field(default=None, description="import --gate only")

    def final_kind(self) -> Kind | None:
        """The gate's kind where it ran, else the static one."""
        if self.gate is not None:
            return None if self.gate.admitted else (self.gate.kind or "task_wrong")
        return self.kind

    def verdict(self) -> str:
        if self.kind is None:
            return "ready for the gate"
        return {
            "task_wrong": "task wrong",
            "cannot_run_here": "cannot run here",
            "infrastructure": "infrastructure",
        }[self.kind]

    def missing_line(self) -> str:
        return "; ".join(m.what for m in self.missing)


class ImportReport(BaseModel):
    dataset: str
    backend: str
    allow_internet: bool
    engine_asked: bool = Field(
        description="base images were checked against the engine (else the offline bases)"
    )
    tasks: list[ImportedTask]

    @computed_field
    @property
    def counts(self) -> dict[str, int]:
        kinds = Counter(t.kind or "ready" for t in self.tasks)
        needs = Counter(m.need for t in self.tasks for m in t.missing)
        return {
            "tasks": len(self.tasks),
            "lint_ok": sum(t.lint_ok for t in self.tasks),
            "ready": kinds["ready"],
            "task_wrong": kinds["task_wrong"],
            "cannot_run_here": kinds["cannot_run_here"],
            **{f"missing_{need}": n for need, n in sorted(needs.items())},
            "forgeable": sum(t.forgeable for t in self.tasks),
            "forgeable_if_separate": sum(t.forgeable_if_separate for t in self.tasks),
            "rewritten": sum(bool(t.rewritten) for t in self.tasks),
        }


def find_tasks(dataset: Path) -> list[Path]:
    """Every folder below `dataset` (itself included) that holds a task.toml, sorted."""
    return sorted({p.parent for p in dataset.rglob("task.toml") if p.is_file()})


class BaseImages:
    """Which base images this machine holds: the engine's answer, or the offline bases when no
    engine answers (the `make bases` set: what a fresh machine of this project has)."""

    def __init__(self, backend: str, ask_engine: bool = True) -> None:
        self.backend = backend
        self._api = None
        engine = our_engine(backend)
        if ask_engine and engine is not None:
            try:
                self._api = client(engine).api
            except Exception:  # noqa: BLE001 - no engine here: judge by the offline bases
                self._api = None
        self._held: dict[str, bool] = {}

    @property
    def engine_asked(self) -> bool:
        return self._api is not None

    def held(self, image: str) -> bool:
        if image not in self._held:
            if self._api is None:
                bare = image.removeprefix("docker.io/").removeprefix("library/")
                self._held[image] = bare in OFFLINE_BASES
            else:
                try:
                    self._held[image] = image_id(self._api, image) is not None
                except Exception:  # noqa: BLE001 - an engine error: do not call it missing
                    self._held[image] = True
        return self._held[image]

    def missing(self, task: Path) -> list[Missing]:
        dockerfile = task / "environment" / "Dockerfile"
        if not dockerfile.is_file():
            return []
        images = parent_images(dockerfile)
        present = {i for i in images if self.held(i)}
        where = (
            f"not in the {self.backend} engine"
            if self.engine_asked
            else "no engine answered, and it is not one of the offline bases"
        )
        # Static: nothing was pulled; offline, the gate's build gets no registry to pull from.
        return [
            m.model_copy(
                update={"what": f"{m.what.split(' (')[0]} ({where}; offline, no registry)"}
            )
            for m in missing_base_images(images, present, self.backend)
        ]


def kind_of(
    report: LintReport, task: Path, bases: BaseImages, allow_internet: bool
) -> tuple[Kind | None, list[Missing]]:
    """The static kind of "no" for an imported task, and what this machine lacks."""
    findings = [f.model_dump() for f in report.findings]
    if not report.ok:
        honour = lint_missing({"findings": findings})
        if not honour:
            return "task_wrong", []
    else:
        honour = []
    # With the internet granted a registry may serve the base: only the build can tell.
    images = [] if allow_internet else bases.missing(task)
    network = missing_network(task, allow_internet, "build", "verifier", "solution")
    missing = [*honour, *images, *network]
    return ("cannot_run_here" if missing else None), missing


def import_task(
    task: Path, dataset: Path, bases: BaseImages, *, allow_internet: bool = False
) -> ImportedTask:
    report = lint_task(task, backend=bases.backend)
    kind, missing = kind_of(report, task, bases, allow_internet)
    forge = forgeability(task)
    return ImportedTask(
        task=task.relative_to(dataset).as_posix() or ".",
        lint_ok=report.ok,
        errors=[str(f) for f in report.errors],
        warnings=dict(Counter(f.rule for f in report.warnings)),
        kind=kind,
        missing=missing,
        forgeable=forge.forgeable,
        forgeable_if_separate=forge.forgeable_if_separate,
        forge_routes=forge.routes,
    )


def import_dataset(
    dataset: Path,
    *,
    backend: str = "podman",
    allow_internet: bool = False,
    ask_engine: bool = True,
    on_task: Callable[[ImportedTask], None] | None = None,
) -> ImportReport:
    """The static report on every task of `dataset`. Raises ValueError when it holds none."""
    tasks = find_tasks(dataset)
    if not tasks:
        raise ValueError(
            f"{dataset} holds no task: a TB2-format dataset is a folder of task folders, each "
            "with task.toml, instruction.md, environment/ and tests/"
        )
    bases = BaseImages(backend, ask_engine=ask_engine)
    out: list[ImportedTask] = []
    for row in _each(tasks, dataset, bases, allow_internet):
        out.append(row)
        if on_task is not None:
            on_task(row)
    return ImportReport(
        dataset=str(dataset),
        backend=backend,
        allow_internet=allow_internet,
        engine_asked=bases.engine_asked,
        tasks=out,
    )


def _each(
    tasks: list[Path], dataset: Path, bases: BaseImages, allow_internet: bool
) -> Iterator[ImportedTask]:
    for task in tasks:
        yield import_task(task, dataset, bases, allow_internet=allow_internet)
