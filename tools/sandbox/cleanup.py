"""Labels on everything we create, and the sweep that removes what no live process can use.

Every container and task image carries `autoenvscaling=1`, the owner process
(`boot-id:pid:start-time`) and the run id; base images carry `autoenvscaling.base` instead, so
images other people build FROM them never inherit ours. Cleanup only ever touches labelled
objects, and never those of a live owner. Scratch folders (`aes-*` in the temp folder) are
swept the same way (tools/scratch.py: each names its owner).
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker.errors
from pydantic import BaseModel, Field

from ..scratch import make_scratch, process_start_time, sweep_scratch
from .base import Backend, SandboxError

LABEL = "autoenvscaling"
OWNER_LABEL = "autoenvscaling.owner"
RUN_LABEL = "autoenvscaling.run"
TASK_LABEL = "autoenvscaling.task"
FOLDER_LABEL = "autoenvscaling.folder"  # the task folder a task image was built for
BASE_LABEL = "autoenvscaling.base"
IMAGE_REPO = "autoenvscaling"  # built task images: autoenvscaling/<task>:<content-hash>
BASE_REPO = "autoenvscaling/base"
SCRATCH_PREFIX = "aes-"  # scratch folders: aes-<what>-<random>

RUN_ID = os.environ.get("AUTOENVSCALING_RUN_ID") or uuid.uuid4().hex[:12]


class CleanupReport(BaseModel):
    containers: list[str] = Field(default_factory=list, description="Removed container names.")
    images: list[str] = Field(default_factory=list, description="Removed image tags or ids.")
    scratch: list[str] = Field(default_factory=list, description="Removed scratch folders.")
    kept: list[str] = Field(default_factory=list, description="Skipped, with the reason.")


def owner() -> str:
    """This process, as `boot-id:pid:start-time`, so a later cleanup can tell if it still lives."""
    return f"{_boot_id()}:{os.getpid()}:{process_start_time(os.getpid())}"


def labels(**extra: str) -> dict[str, str]:
    """The labels of a container or image this process creates."""
    return {LABEL: "1", OWNER_LABEL: owner(), RUN_LABEL: RUN_ID, **extra}


def image_labels(task_name: str, task_dir: Path) -> dict[str, str]:
    """The labels of a task image: ours, its task, and its folder (a folder name with a control
    character is not recorded: the image then counts as a folder gone once its owner is)."""
    folder = str(task_dir)
    recorded = {FOLDER_LABEL: folder} if folder.isprintable() else {}
    return labels(**{TASK_LABEL: task_name}, **recorded)


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


def owner_alive(owner_id: str) -> bool | None:
    """True / False for an owner on this machine's current boot; None when we cannot tell."""
    try:
        boot, pid, started = owner_id.rsplit(":", 2)
    except ValueError:
        return None
    if boot != _boot_id():
        return None
    return process_start_time(int(pid)) == started


def remove_container(api: Any, container_id: str) -> None:
    try:
        api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        text = str(exc)
        if "already in progress" not in text and "no such container" not in text.lower():
            raise SandboxError(f"could not remove container {container_id[:12]}: {exc}") from exc


def scratch_dir(what: str) -> Path:
    """A fresh scratch folder of this process, swept by `cleanup_stale` once it is gone."""
    return make_scratch(f"{SCRATCH_PREFIX}{what}-")


def cleanup_stale(api: Any) -> CleanupReport:
    """Remove our containers that no process can use any more, and dead processes' scratch.

    A labelled container is stale when it has exited, or when its owner (recorded at start) was
    a process on this machine that has exited. Containers of live owners, and of owners on other
    machines, are left alone while they run; unlabelled containers are never looked at. `api`:
    the engine's low-level client (engine.client(backend).api), given by the caller so this
    module stays below the engine.
    """
    report = CleanupReport(scratch=sweep_scratch(SCRATCH_PREFIX))
    for info in api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        name = (info.get("Names") or [info["Id"][:12]])[0].lstrip("/")
        owner_id = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        ended = info.get("State") in ("exited", "dead", "stopped")
        # A live (or unknown) owner's container may be just starting: only an ended one goes.
        if not ended and owner_alive(owner_id) is not False:
            continue
        remove_container(api, info["Id"])
        report.containers.append(name)
    return report


_SWEPT: set[str] = set()


def sweep_once(backend: Backend, api_of: Callable[[Backend], Any]) -> CleanupReport | None:
    """`cleanup_stale` the first time a process uses an engine (a crashed run's leftovers);
    `api_of(backend)` gives the engine's API, asked only then."""
    if backend in _SWEPT:
        return None
    _SWEPT.add(backend)
    try:
        return cleanup_stale(api_of(backend))
    except Exception:  # noqa: BLE001 - a failed sweep must not stop the work; doctor reports it
        return None
