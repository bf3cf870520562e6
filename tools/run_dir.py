"""The run folder: everything one flywheel run produces, in one documented layout.

RUN_DIR/
  manifest.json        config, package versions, seeds, policy lineage
  pool/                admitted Harbor task folders + pool.json (status, difficulty history)
  candidates/rNN/      every proposed task folder, with verdict.json next to it
  rollouts.db          the rollout store (SQLite, WAL): every solver and proposer attempt
  checkpoints/         the checkpoint registry (one folder + manifest per checkpoint)
  reports/             round-NN.md, run.md, PNG plots, metrics.json
  trials/              Harbor's trial folders (logs, verifier output)
  graph.sqlite         LangGraph checkpointer: lets `--resume` continue a killed run
  store.json           only for a run on PostgreSQL (`--store postgresql://...`): the URL that
                       holds its rollouts and checkpoints instead of the two SQLite files
"""

from __future__ import annotations

import json
import os
import platform
import sys
import uuid
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

PACKAGES = (
    "autoenvscaling",
    "langgraph",
    "langchain-core",
    "mcp",
    "harbor",
    "trl",
    "torch",
    "transformers",
    "peft",
    "vllm",
    "llama-cpp-python",
)


class Manifest(BaseModel):
    run_id: str
    created_at: datetime
    config: dict[str, Any] = Field(default_factory=dict)
    packages: dict[str, str] = Field(default_factory=dict)
    python: str = ""
    machine: str = ""
    seeds: dict[str, int] = Field(default_factory=dict)
    policy_lineage: list[dict[str, Any]] = Field(default_factory=list)


def _versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


class RunDir:
    def __init__(self, root: Path, store: str | None = None) -> None:
        """`store`: a PostgreSQL URL for the rollouts and the checkpointer; None: the one the
        folder's store.json names, else the SQLite files in the folder."""
        self.root = Path(root).resolve()
        self._store = store

    @property
    def store(self) -> str:
        """Where the run's rollouts live: the PostgreSQL URL, or the path of rollouts.db."""
        if self._store:
            return self._store
        if self.store_json.is_file():
            return str(json.loads(self.store_json.read_text())["url"])
        return str(self.rollouts)

    @property
    def on_postgres(self) -> bool:
        return self.store.startswith(("postgresql://", "postgres://"))

    @property
    def has_store(self) -> bool:
        """Whether the run has a rollout store to read (a PostgreSQL one is assumed to)."""
        return self.on_postgres or self.rollouts.is_file()

    @property
    def store_json(self) -> Path:
        return self.root / "store.json"

    def remember_store(self) -> None:
        """Write store.json for a run on PostgreSQL, so readers of the folder (report, viewer,
        export, a resume) find its database. The URL is kept as given: prefer a password in
        ~/.pgpass or PGPASSWORD to one in the URL."""
        if self._store and self.on_postgres:
            self.root.mkdir(parents=True, exist_ok=True)
            tmp = self.store_json.with_suffix(".tmp")
            tmp.write_text(json.dumps({"url": self._store}))
            os.replace(tmp, self.store_json)

    @property
    def pool(self) -> Path:
        return self.root / "pool"

    @property
    def rollouts(self) -> Path:
        return self.root / "rollouts.db"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    @property
    def trials(self) -> Path:
        return self.root / "trials"

    @property
    def graph_db(self) -> Path:
        return self.root / "graph.sqlite"

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def candidates(self, round_: int) -> Path:
        return self.root / "candidates" / f"r{round_:02d}"

    def create(self, config: dict[str, Any], seeds: dict[str, int] | None = None) -> Manifest:
        for folder in (self.pool, self.checkpoints, self.reports, self.trials):
            folder.mkdir(parents=True, exist_ok=True)
        self.remember_store()
        if self.manifest_path.exists():
            return self.manifest()
        manifest = Manifest(
            run_id=f"run-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}",
            created_at=datetime.now(UTC),
            config=config,
            packages=_versions(),
            python=sys.version.split()[0],
            machine=f"{platform.machine()} {os.cpu_count()} cpus",
            seeds=seeds or {},
        )
        self.write_manifest(manifest)
        return manifest

    def manifest(self) -> Manifest:
        return Manifest.model_validate_json(self.manifest_path.read_text())

    def write_manifest(self, manifest: Manifest) -> None:
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(manifest.model_dump_json(indent=2))
        os.replace(tmp, self.manifest_path)

    def add_lineage(self, entry: dict[str, Any]) -> None:
        manifest = self.manifest()
        if entry not in manifest.policy_lineage:
            manifest.policy_lineage.append(json.loads(json.dumps(entry, default=str)))
            self.write_manifest(manifest)
