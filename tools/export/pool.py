"""Export a run's task pool as a Harbor dataset folder.

Harbor 0.25 reads a local dataset as a folder of task folders (`harbor run -p DIR`,
`DatasetConfig.path`); its registry layout adds `dataset.toml` (`DatasetManifest`: `[dataset]`
name `org/name`, one `[[tasks]]` entry per task with its name and `sha256:` content digest), which
`harbor dataset add` / `harbor publish` read. Each task's `task.toml` gets the `[task]` package
section Harbor keys tasks on (written by Harbor's own `TaskConfig`, as `harbor task update` does),
and the digest is Harbor's own `Packager.compute_content_hash`, so `harbor publish` finds the
same. Next to each task's files lies `validity.json` (see validity.py); Harbor's packager does
not hash or publish it, so the card never changes the digest it records.

    OUT/
      dataset.toml
      README.md
      <task_id>/ task.toml instruction.md environment/ tests/ solution/ validity.json
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path
from typing import Literal

from harbor.models.dataset.manifest import DatasetInfo, DatasetManifest, DatasetTaskRef
from harbor.models.task.config import PackageInfo, TaskConfig
from harbor.publisher.packager import Packager
from pydantic import BaseModel, Field

from ..rollouts.store import RolloutStore
from ..run_dir import RunDir
from ..tasks.pool import Pool
from .validity import ValidityCard, build_card, write_card

DEFAULT_ORG = "autoenvscaling"
_NAME_CHARS = re.compile(r"[^a-zA-Z0-9._-]+")


class ExportError(RuntimeError):
    """The export could not be written; the message says what to change."""


class ExportedTask(BaseModel):
    task_id: str
    name: str
    digest: str
    path: str
    card: ValidityCard


class ExportedPool(BaseModel):
    dataset: str = Field(description="The dataset folder.")
    name: str = Field(description="org/name in dataset.toml.")
    tasks: list[ExportedTask]


def _segment(text: str) -> str:
    """A Harbor name segment: letters, digits, `._-`, starting with a letter or digit."""
    cleaned = _NAME_CHARS.sub("-", text).strip("-.")
    if not cleaned:
        raise ExportError(f"{text!r} has no character Harbor allows in a name")
    return cleaned


def _set_package_name(task_dir: Path, name: str, description: str) -> None:
    """Write `[task] name = org/task` into task.toml with Harbor's own model and serializer."""
    path = task_dir / "task.toml"
    config = TaskConfig.model_validate_toml(path.read_text())
    config.task = PackageInfo(name=name, version="1.0.0", description=description)
    path.write_text(config.model_dump_toml())


def _proposer_attempts(run: RunDir) -> dict[str, dict]:
    """candidate folder -> the proposer attempt that wrote it (as a JSON dict)."""
    if not run.has_store:
        return {}
    out: dict[str, dict] = {}
    with RolloutStore(run.store) as store:
        for attempt in store.list_attempts(role="proposer", limit=1_000_000):
            candidate = attempt.metadata.get("candidate")
            if candidate:
                out[str(Path(candidate).resolve())] = attempt.model_dump(mode="json")
    return out


def export_pool(
    run_dir: Path,
    out: Path,
    *,
    org: str = DEFAULT_ORG,
    name: str | None = None,
    status: Literal["active", "all"] = "active",
    admitted_only: bool = False,
    overwrite: bool = False,
) -> ExportedPool:
    """Write `run_dir`'s pool to `out` as a Harbor dataset (see the module docstring)."""
    run = RunDir(run_dir)
    if not run.manifest_path.exists():
        raise ExportError(f"{run.root} is not a run folder (no manifest.json); pass RUN_DIR")
    manifest = run.manifest()
    pool = Pool(run.pool)
    entries = pool.entries(None if status == "all" else "active")
    if admitted_only:
        entries = [e for e in entries if e.source == "proposed"]
    if not entries:
        raise ExportError(f"the pool of {run.root} holds no {status} task to export")
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        if not overwrite:
            raise ExportError(f"{out} exists and is not empty; pass --overwrite or another folder")
        shutil.rmtree(out)
    org = _segment(org)
    dataset_name = f"{org}/{_segment(name or manifest.run_id)}"
    proposers = _proposer_attempts(run)

    tmp = out.parent / f".{out.name}.{uuid.uuid4().hex[:6]}.tmp"
    tmp.mkdir(parents=True)
    try:
        exported: list[ExportedTask] = []
        refs: list[DatasetTaskRef] = []
        for entry in entries:
            source = pool.path(entry.task_id)
            target = tmp / entry.task_id
            shutil.copytree(source, target, symlinks=True)
            task_name = f"{org}/{_segment(entry.task_id)}"
            _set_package_name(target, task_name, f"{entry.source} task from {manifest.run_id}")
            digest = f"sha256:{Packager.compute_content_hash(target)[0]}"
            candidate = (
                run.candidates(entry.admitted_round)
                / entry.task_id.removeprefix(f"r{entry.admitted_round:02d}-")
            ).resolve()
            card = build_card(
                run=run,
                manifest=manifest,
                entry=entry,
                name=task_name,
                content_hash=digest,
                proposer_attempt=proposers.get(str(candidate)),
            )
            write_card(card, target)
            refs.append(DatasetTaskRef(name=task_name, digest=digest))
            exported.append(
                ExportedTask(
                    task_id=entry.task_id,
                    name=task_name,
                    digest=digest,
                    path=str(out / entry.task_id),
                    card=card,
                )
            )
        dataset = DatasetManifest(
            dataset=DatasetInfo(
                name=dataset_name,
                version="1.0.0",
                description=f"Task pool of flywheel run {manifest.run_id}",
                keywords=["autoenvscaling", "terminal", "rl-environments"],
            ),
            tasks=refs,
            metadata={
                "run_id": manifest.run_id,
                "validity_card": "validity.json in each task folder",
            },
        )
        (tmp / "dataset.toml").write_text(dataset.to_toml())
        (tmp / "README.md").write_text(_readme(dataset_name, manifest.run_id, exported))
        if out.exists():
            out.rmdir()
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return ExportedPool(dataset=str(out), name=dataset_name, tasks=exported)


def _readme(name: str, run_id: str, tasks: list[ExportedTask]) -> str:
    rows = "\n".join(
        f"| {t.task_id} | {t.card.source} | "
        f"{'yes' if t.card.gated else 'no'} | "
        f"{'' if t.card.calibration is None else t.card.calibration.pass_rate} | "
        f"{t.digest[:19]}… |"
        for t in tasks
    )
    return (
        f"# {name}\n\nHarbor tasks admitted by the autoenvscaling flywheel run `{run_id}`.\n\n"
        "Run them: `harbor run -p <this folder> -a oracle`. Each task folder holds "
        "`validity.json`: the stored gate results behind its admission.\n\n"
        "| task | source | gated | calibration pass rate | digest |\n| --- | --- | --- | --- | --- |\n"
        f"{rows}\n"
    )
