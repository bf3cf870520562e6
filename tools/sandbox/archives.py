"""Copying files into and out of a sandbox through the engine's archive API.

Uploads are packed on disk (never a whole folder in memory), owned by root. Downloads are streamed
to a scratch folder and refused over `max_download_mb` (a sparse 2 GB log never grows the host
process), then extracted with tarfile's `data` filter (no links or paths that leave the folder).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import docker.errors

from autoenvscaling.tools.sandbox.base import SandboxError
from autoenvscaling.tools.sandbox.cleanup import scratch_dir
from autoenvscaling.tools.sandbox.engine import call
from autoenvscaling.tools.settings import get_settings

if TYPE_CHECKING:
    from autoenvscaling.tools.sandbox.container import ContainerSandbox


class DownloadTooLargeError(SandboxError):
    """A download from the sandbox went over the configured cap; nothing was written."""


async def upload(box: ContainerSandbox, source: Path, target: str) -> None:
    source = Path(source)
    if not source.exists():
        raise SandboxError(f"upload: {source} does not exist")
    with tempfile.TemporaryFile() as buffer:  # on disk: a large folder never sits in memory
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if source.is_dir():
                dest = target
                for child in sorted(source.iterdir()):
                    tar.add(child, arcname=child.name, filter=_as_root)
            else:
                dest = os.path.dirname(target.rstrip("/")) or "/"
                tar.add(source, arcname=os.path.basename(target.rstrip("/")), filter=_as_root)
        for attempt in (1, 2):
            buffer.seek(0)
            try:
                await call(box._api.put_archive, box.container_id, dest, buffer)
                return
            except docker.errors.NotFound:
                if attempt == 2:
                    raise SandboxError(f"upload to {target} failed: {dest} is missing") from None
            except Exception as exc:
                raise SandboxError(f"upload to {target} failed: {exc}") from exc
            # The destination folder does not exist yet.
            made = await box.exec(f"mkdir -p {shlex.quote(dest)}", cwd="/", user="root")
            if made.exit_code != 0:
                raise SandboxError(
                    f"upload to {target} failed: {(made.stderr or made.stdout)[-500:]}"
                )


async def download(box: ContainerSandbox, source: str, target: Path) -> None:
    """Copy out of the sandbox, streamed to disk and capped (`max_download_mb`)."""
    target = Path(target)
    path = source.rstrip("/") or "/"
    cap = get_settings().max_download_mb * 1024 * 1024
    tmp = scratch_dir("download")
    try:
        try:
            name, is_dir = await call(_fetch_archive, box._api, box.container_id, path, tmp, cap)
        except DownloadTooLargeError:
            raise
        except Exception as exc:
            raise SandboxError(f"download of {source} failed: {exc}") from exc
        extracted = tmp / "x" / name
        if is_dir:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copytree(extracted, target, dirs_exist_ok=True, symlinks=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(extracted, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _fetch_archive(api: Any, container_id: str, path: str, tmp: Path, cap: int) -> tuple[str, bool]:
    """Stream the engine's tar of `path` to disk, stopping at `cap` bytes; then extract safely."""
    chunks, stat = api.get_archive(container_id, path)
    archive = tmp / "archive.tar"
    written = 0
    with open(archive, "wb") as handle:
        for chunk in chunks:
            written += len(chunk)
            if written > cap:
                close = getattr(chunks, "close", None)
                if close:
                    close()
                raise DownloadTooLargeError(
                    f"download of {path} is over the {cap // (1024 * 1024)} MB cap "
                    "(AUTOENVSCALING_MAX_DOWNLOAD_MB); nothing was copied"
                )
            handle.write(chunk)
    total = 0
    with tarfile.open(archive) as tar:
        for member in tar:  # sparse or not, what lands on disk is capped too
            total += member.size
            if total > cap:
                raise DownloadTooLargeError(f"download of {path} unpacks to over the cap")
        tar.extractall(tmp / "x", filter="data")  # refuses links and paths that leave tmp
    is_dir = bool(stat.get("mode", 0) & (1 << 31))  # Go's os.ModeDir
    return stat["name"], is_dir
