"""Named locks in the engine's cache folder, held across processes: one build of a task image, or
one import of the base, at a time, whichever of our processes asks (`CacheLock`); and the task
images a live process uses (`hold_image`), which no sweep removes under it."""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator
from typing import IO

from .podman_service import config_dir


def tag_lock_name(kind: str, tag: str) -> str:
    """The lock file name for an image tag: `<kind>-<tag with / and : replaced>`."""
    return f"{kind}-{tag.removeprefix('localhost/').replace('/', '_').replace(':', '_')}"


#: Held shared by every build of a task image, exclusively by the stale-image sweep for each
#: removal: podman's layer-cache lookup fails a build ("layer not known") when an image is
#: removed while it looks, so our own sweep never removes one while a build of ours runs.
BUILDS = "builds"


class CacheLock:
    """`with CacheLock("build-x"):` holds `<cache>/engine/build-x.lock` exclusively (flock), or
    shared with `shared=True`."""

    def __init__(self, name: str, *, shared: bool = False) -> None:
        self.path = config_dir() / f"{name}.lock"
        self.mode = fcntl.LOCK_SH if shared else fcntl.LOCK_EX
        self._handle: IO[str] | None = None

    def __enter__(self) -> None:
        self._handle = open(self.path, "a")  # noqa: SIM115 - closed in __exit__
        fcntl.flock(self._handle, self.mode)

    def __exit__(self, *exc: object) -> None:
        if self._handle is not None:
            fcntl.flock(self._handle, fcntl.LOCK_UN)
            self._handle.close()
            self._handle = None


# Each image this process used: a shared flock on its `use-` file, open until the process exits
# (the kernel drops it then, whatever the exit). Tags are content hashes, so another process may
# reuse an image an exited one built; the stale-image sweep takes the lock exclusively, without
# waiting, and skips an image any live process holds. The files stay: removing one while another
# process opens it would let two processes lock two different files.
_HELD: dict[str, IO[str]] = {}
_HELD_LOCK = threading.Lock()


def hold_image(tag: str) -> None:
    """Mark `tag` as used by this process for the rest of its life (before looking it up: a
    sweep that removed it first is then seen as a missing image, and it is built again)."""
    name = tag_lock_name("use", tag)
    with _HELD_LOCK:
        if name in _HELD:
            return
        handle = open(config_dir() / f"{name}.lock", "a")  # noqa: SIM115 - held until exit
        fcntl.flock(handle, fcntl.LOCK_SH)
        _HELD[name] = handle


@contextlib.contextmanager
def unless_in_use(tag: str) -> Iterator[bool]:
    """`with unless_in_use(tag) as free:` free is False when a live process holds `tag` (this
    one included); when True, no process can start using it until the block ends (its
    `hold_image` waits), so the image can be removed in the block."""
    with open(config_dir() / f"{tag_lock_name('use', tag)}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
