"""Checkpoint registry: one folder per checkpoint, atomic publish, lineage.

Layout under `root`:
    checkpoints/<id>/manifest.json   the Checkpoint model (written last, inside the staging folder)
    checkpoints/<id>/weights/...     a PEFT adapter or a full HF model
    CURRENT                          the id of the served checkpoint (one line)
    .staging/<id>-<random>/          work in progress; never read, swept on open

Publishing copies (or moves) the weights into a staging folder, writes the manifest, fsyncs every
file and folder, then renames the staging folder into `checkpoints/` — one atomic step on one
filesystem. `CURRENT` changes by writing a temp file and renaming it over the old one. A crash at
any point leaves either the old state or the new one: a checkpoint without a manifest is never
listed, and CURRENT never names a folder that was not fully renamed into place.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .policy import Checkpoint, CheckpointKind

MANIFEST = "manifest.json"
WEIGHTS = "weights"
CURRENT = "CURRENT"
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


class RegistryError(RuntimeError):
    """The registry was asked for something it does not hold, or could not write."""


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_tree(root: Path) -> None:
    """fsync every file, then every folder bottom-up, so the rename publishes durable bytes."""
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            full = Path(dirpath) / name
            if not full.is_symlink():
                _fsync_path(full)
        _fsync_path(Path(dirpath))


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    _fsync_path(path.parent)


def new_checkpoint_id(prefix: str = "ckpt") -> str:
    """A sortable, unique id: prefix-YYYYmmddTHHMMSS-<hex>. Also valid as a served model name."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


class CheckpointRegistry:
    """Checkpoints on a local filesystem. Safe for one writer; readers may run at any time."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.checkpoints_dir = self.root / "checkpoints"
        self.staging_dir = self.root / ".staging"
        self.checkpoints_dir.mkdir(parents=True, exist_ok=True)
        self.staging_dir.mkdir(parents=True, exist_ok=True)

    # ---------- writing ----------

    def publish(
        self,
        weights: Path,
        *,
        base_model: str,
        kind: CheckpointKind,
        parent_id: str | None = None,
        job_id: str | None = None,
        metrics: dict[str, Any] | None = None,
        checkpoint_id: str | None = None,
        make_current: bool = True,
        move: bool = False,
    ) -> Checkpoint:
        """Publish the weights folder as a new checkpoint; optionally make it current.

        `move=True` renames the weights into place instead of copying (same filesystem only).
        """
        ckpt_id = checkpoint_id or new_checkpoint_id()
        if not _ID_RE.match(ckpt_id):
            raise RegistryError(
                f"invalid checkpoint id {ckpt_id!r}: use letters, digits, '.', '_', '-'"
            )
        if (self.checkpoints_dir / ckpt_id).exists():
            raise RegistryError(f"checkpoint {ckpt_id!r} already exists in {self.checkpoints_dir}")
        if parent_id is not None and not self.exists(parent_id):
            raise RegistryError(f"parent checkpoint {parent_id!r} is not in the registry")
        weights = Path(weights)
        if not weights.is_dir():
            raise RegistryError(f"weights folder {weights} does not exist")

        stage = self.staging_dir / f"{ckpt_id}-{secrets.token_hex(4)}"
        stage.mkdir(parents=True)
        try:
            target_weights = stage / WEIGHTS
            if move:
                os.replace(weights, target_weights)
            else:
                shutil.copytree(weights, target_weights, symlinks=False)
            final = self.checkpoints_dir / ckpt_id
            checkpoint = Checkpoint(
                id=ckpt_id,
                path=final / WEIGHTS,
                parent_id=parent_id,
                base_model=base_model,
                kind=kind,
                job_id=job_id,
                metrics=metrics or {},
            )
            (stage / MANIFEST).write_text(checkpoint.model_dump_json(indent=2), encoding="utf-8")
            _fsync_tree(stage)
            os.rename(stage, final)  # the publish point
            _fsync_path(self.checkpoints_dir)
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        if make_current:
            self.set_current(ckpt_id)
        return checkpoint

    def set_current(self, checkpoint_id: str | None) -> None:
        """Point CURRENT at a published checkpoint (None = back to the base model)."""
        if checkpoint_id is not None and not self.exists(checkpoint_id):
            raise RegistryError(f"cannot make {checkpoint_id!r} current: it is not published")
        _write_atomic(self.root / CURRENT, (checkpoint_id or "") + "\n")

    def sweep_staging(self) -> list[str]:
        """Remove half-written staging folders (left by a crash). Returns their names."""
        removed = []
        for entry in self.staging_dir.iterdir():
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry.name)
        return removed

    # ---------- reading ----------

    def exists(self, checkpoint_id: str) -> bool:
        return (self.checkpoints_dir / checkpoint_id / MANIFEST).is_file()

    def get(self, checkpoint_id: str) -> Checkpoint:
        manifest = self.checkpoints_dir / checkpoint_id / MANIFEST
        if not manifest.is_file():
            raise RegistryError(f"no checkpoint {checkpoint_id!r} in {self.checkpoints_dir}")
        data = json.loads(manifest.read_text(encoding="utf-8"))
        # The folder may have moved with the whole registry: trust the location, not the stored path.
        data["path"] = str(manifest.parent / WEIGHTS)
        return Checkpoint.model_validate(data)

    def list(self) -> list[Checkpoint]:
        """Every published checkpoint, oldest first."""
        found = [
            self.get(p.name) for p in self.checkpoints_dir.iterdir() if (p / MANIFEST).is_file()
        ]
        return sorted(found, key=lambda c: (c.created_at, c.id))

    def current_id(self) -> str | None:
        path = self.root / CURRENT
        if not path.is_file():
            return None
        value = path.read_text(encoding="utf-8").strip()
        return value or None

    def current(self) -> Checkpoint | None:
        ckpt_id = self.current_id()
        return self.get(ckpt_id) if ckpt_id else None

    def children(self, checkpoint_id: str) -> list[Checkpoint]:
        return [c for c in self.list() if c.parent_id == checkpoint_id]
