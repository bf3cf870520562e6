"""Removal of the task images we built: all but those to keep, one rejected task's, or those no
process can use again.

Only images labelled `autoenvscaling=1` whose every tag is `autoenvscaling/...` (base images
never) are ours to remove; an image a container uses is kept and reported, and one another live
run built is left to that run. A task image whose builder has exited and whose task folder is
gone (a deleted run, a test's temporary folder) is stale: each process sweeps those once, in the
background, at its first sandbox (`sweep_stale_images_once`), so the store does not grow with
every run; podman's image listing slows with the store (~55 ms an image here).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import docker.errors

from . import cleanup
from .base import Backend
from .cache_lock import BUILDS, CacheLock, tag_lock_name, unless_in_use
from .cleanup import (
    BASE_REPO,
    FOLDER_LABEL,
    IMAGE_REPO,
    LABEL,
    OWNER_LABEL,
    RUN_LABEL,
    CleanupReport,
)
from .engine import LISTING_SEC, client
from .image_tags import image_tag


def _ours(image: dict[str, Any]) -> bool:
    tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
    names = [t.removeprefix("localhost/") for t in tags]
    return all(t.startswith(f"{IMAGE_REPO}/") and not t.startswith(BASE_REPO) for t in names)


def list_images(
    api: Any, filters: dict[str, Any] | None = None, tries: int = 8
) -> list[dict[str, Any]]:
    """The engine's images. podman fails the whole listing ("image not known") when another
    process removes an image while it lists (every process sweeps stale images): listed again,
    a moment later, up to `tries` times."""
    for attempt in range(tries):
        try:
            return api.images(filters=filters)
        except docker.errors.APIError as exc:
            if "image not known" not in str(exc) or attempt == tries - 1:
                raise
            time.sleep(0.1 * 2**attempt)
    return []


def _labelled_images(api: Any) -> list[dict[str, Any]]:
    return list_images(api, filters={"label": f"{LABEL}=1"})


def _listing_api(backend: Backend) -> Any:
    return client(backend, bound=LISTING_SEC).api


def is_stale(image: dict[str, Any], backend: Backend) -> bool:
    """A task image of ours that no process can use again: its builder has exited and its task
    folder is gone. podman's store is this machine's, so an owner from an earlier boot (or one
    not recorded) has exited too; a docker daemon may serve other machines, whose owners we
    cannot tell: kept."""
    if not _ours(image):
        return False
    image_labels = image.get("Labels") or {}
    alive = cleanup.owner_alive(image_labels.get(OWNER_LABEL, ""))
    if alive or (alive is None and backend != "podman"):
        return False
    folder = image_labels.get(FOLDER_LABEL)
    return not folder or not (Path(folder) / "environment").is_dir()


def sweep_stale_images(backend: Backend = "podman") -> CleanupReport:
    """Remove the stale task images (`is_stale`) that no live process holds (another process may
    have reused the tag: cache_lock.hold_image). Each is removed under its tag's build lock, so a
    build of the same tag in a live process waits, then builds it again."""
    api = _listing_api(backend)
    report = CleanupReport()
    for image in _labelled_images(api):
        if not is_stale(image, backend):
            continue
        tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
        try:
            for tag in tags or [image["Id"]]:
                with CacheLock(tag_lock_name("build", tag)), unless_in_use(tag) as free:
                    if not free:
                        report.kept.append(f"{tag}: used by a live process")
                        break
                    with CacheLock(BUILDS):  # no build of ours is looking up its layer cache
                        api.remove_image(tag, force=False, noprune=False)
            else:
                report.images.extend([t.removeprefix("localhost/") for t in tags] or [image["Id"]])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:  # a container uses it: the container sweep's
            report.kept.append(f"{tags or image['Id']}: {exc.explanation or exc}")
    return report


_SWEEPING: dict[Backend, threading.Thread] = {}
_SWEEPING_LOCK = threading.Lock()


def sweep_stale_images_once(backend: Backend) -> threading.Thread:
    """`sweep_stale_images` in a background thread, the first time this process asks; the
    thread (joined by whoever must see the store swept). A failed sweep is left to the next."""

    def sweep() -> None:
        try:
            sweep_stale_images(backend)
        except Exception:  # noqa: BLE001 - a sweep must never stop the work; doctor --clean says
            pass

    with _SWEEPING_LOCK:
        if backend not in _SWEEPING:
            thread = threading.Thread(target=sweep, name="aes-image-sweep", daemon=True)
            thread.start()
            _SWEEPING[backend] = thread
        return _SWEEPING[backend]


def gc_images(keep: Iterable[str], *, backend: Backend = "podman") -> CleanupReport:
    """Remove the task images this run built, except those named in `keep` (tags or image ids).

    Only images labelled `autoenvscaling=1` with this process's run id, whose every tag is
    `autoenvscaling/...` (or that have no tag left), are candidates: another run's images are
    that run's to remove, even one it is building while this listing runs (a keep-list snapshot
    cannot name those). Images in use by a container are skipped and reported.
    """
    api = _listing_api(backend)
    keep = {k.removeprefix("localhost/") for k in keep}
    report = CleanupReport()
    for image in _labelled_images(api):
        if not _ours(image) or (image.get("Labels") or {}).get(RUN_LABEL) != cleanup.RUN_ID:
            continue
        tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
        if keep & {image["Id"], *(t.removeprefix("localhost/") for t in tags)}:
            continue
        try:
            for tag in tags or [image["Id"]]:
                api.remove_image(tag, force=False, noprune=False)
            report.images.extend([t.removeprefix("localhost/") for t in tags] or [image["Id"]])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            report.kept.append(f"{tags or image['Id']}: {exc.explanation or exc}")
    return report


def remove_task_image(task_dir: Path, *, backend: Backend = "podman") -> bool:
    """Remove the image built for one task folder (a rejected candidate). False if none.

    Not an image another live run built: the tag is a content hash, so that run may be about to
    start a container from the same image. (A killed run's images go: its resume rejects them.)
    """
    api = client(backend).api
    task_dir = Path(task_dir).resolve()
    tag = image_tag(task_dir.name, task_dir / "environment", backend)
    try:
        image_labels = api.inspect_image(tag).get("Config", {}).get("Labels") or {}
    except docker.errors.APIError:  # gone (podman answers "no such image" with several codes)
        return False
    ours = image_labels.get(RUN_LABEL) == cleanup.RUN_ID
    if not ours and cleanup.owner_alive(image_labels.get(OWNER_LABEL, "")) is not False:
        return False
    try:
        api.remove_image(tag, force=False, noprune=False)
    except docker.errors.NotFound:
        return False
    return True
