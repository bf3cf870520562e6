"""Named exclusive locks in the engine's cache folder, held across processes: one build of a task
image, or one import of the base, at a time, whichever of our processes asks."""

from __future__ import annotations

import fcntl
from typing import IO

from .podman_service import config_dir


class CacheLock:
    """`with CacheLock("build-x"):` holds `<cache>/engine/build-x.lock` exclusively (flock)."""

    def __init__(self, name: str) -> None:
        self.path = config_dir() / f"{name}.lock"
        self._handle: IO[str] | None = None

    def __enter__(self) -> None:
        self._handle = open(self.path, "w")  # noqa: SIM115 - closed in __exit__
        fcntl.flock(self._handle, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None
