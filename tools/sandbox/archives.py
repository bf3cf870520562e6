"""Copying files into and out of a sandbox through the engine's archive API.

Uploads are packed on disk (never a whole folder in memory), owned by root. Downloads are read
from the engine's archive stream member by member and extracted with tarfile's `data` filter (no
links or paths that leave the folder), never buffered whole (a sparse 2 GB log never grows the
host process). A download degrades, it never disappears: a member the filter refuses (an
absolute link, as a venv leaves) or a file that would take the copy past `max_download_mb` is
skipped and named ("path (why)"), the rest is copied. The stream itself is read at most to
`READ_CAP_FACTOR` times the cap; what comes after is named as not copied.
"""

from __future__ import annotations

import os
import posixpath
import shlex
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, cast

import docker.errors

from ..settings import get_settings
from .base import SandboxError
from .cleanup import scratch_dir
from .engine import call
from .exec_archive import ExecArchive
from .runtimes import RUNTIMES

if TYPE_CHECKING:
    from .container import ContainerSandbox


#: How much of the engine's stream is read (skipped members included), in multiples of the cap.
READ_CAP_FACTOR = 2


class DownloadTooLargeError(SandboxError):
    """A download from the sandbox went over the configured cap; nothing was written."""


class _StreamCapError(Exception):
    """The engine's archive stream went past the read cap."""


class _ChunkReader:
    """A file-like view of the engine's archive chunks for tarfile's stream mode, capped."""

    def __init__(self, chunks: Any, cap: int) -> None:
        self._chunks = iter(chunks)
        self._close = getattr(chunks, "close", None)
        self._buffer = b""
        self._offset = 0  # read position in _buffer: no copy of the rest on every small read
        self._cap = cap
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) - self._offset < size:
            try:
                chunk = next(self._chunks)
            except StopIteration:
                break
            self.read_bytes += len(chunk)
            if self.read_bytes > self._cap:
                raise _StreamCapError
            self._buffer = self._buffer[self._offset :] + chunk
            self._offset = 0
        end = len(self._buffer) if size < 0 else self._offset + size
        out = self._buffer[self._offset : end]
        self._offset = min(end, len(self._buffer))
        return out

    def close(self) -> None:
        if self._close:
            self._close()


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
                await call(_archive_api(box).put_archive, box.container_id, dest, buffer)
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


async def download(box: ContainerSandbox, source: str, target: Path) -> list[str]:
    """Copy out of the sandbox, streamed and capped (`max_download_mb`); returns what was
    skipped, as "path (why)". A single file that cannot be copied raises."""
    target = Path(target)
    path = source.rstrip("/") or "/"
    cap = get_settings().max_download_mb * 1024 * 1024
    tmp = scratch_dir("download")
    try:
        try:
            name, is_dir, skipped = await call(
                _fetch_archive, _archive_api(box), box.container_id, path, tmp, cap
            )
        except Exception as exc:
            raise SandboxError(f"download of {source} failed: {exc}") from exc
        extracted = tmp / "x" / name
        if not extracted.exists() and not extracted.is_symlink():
            what = "; ".join(skipped[:3]) or "nothing arrived"
            error = DownloadTooLargeError if "cap" in what else SandboxError
            raise error(f"download of {source}: nothing was copied: {what}")
        if is_dir:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copytree(extracted, target, dirs_exist_ok=True, symlinks=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(extracted, target)
        return skipped
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _archive_api(box: ContainerSandbox) -> Any:
    """The engine's archive API, or `exec tar` where the runtime's root is out of its reach."""
    if RUNTIMES[box.ref.handle.get("runtime", "runc")].engine_copies:
        return box._api

    return ExecArchive(box.ref.backend)


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _fetch_archive(
    api: Any, container_id: str, path: str, tmp: Path, cap: int
) -> tuple[str, bool, list[str]]:
    """Read the engine's tar of `path` member by member into `tmp/x`: what the `data` filter
    refuses and files past `cap` bytes in all are skipped and named; the stream is read to at
    most READ_CAP_FACTOR * cap. Returns (name, is_dir, skipped)."""
    chunks, stat = api.get_archive(container_id, path)
    dest = tmp / "x"
    dest.mkdir(parents=True, exist_ok=True)
    parent = posixpath.dirname(path.rstrip("/")) or "/"
    reader = _ChunkReader(chunks, READ_CAP_FACTOR * cap)
    skipped: list[str] = []
    folders: list[tuple[Path, int]] = []
    written = 0
    cap_mb = cap // (1024 * 1024)
    try:
        # Stream mode only reads: the reader needs no seek, tell or write.
        with tarfile.open(fileobj=cast("IO[bytes]", reader), mode="r|") as tar:
            for member in tar:
                where = posixpath.join(parent, member.name)
                try:
                    member = tarfile.data_filter(member, str(dest))
                except tarfile.FilterError as exc:
                    skipped.append(f"{where} ({_why(exc)})")
                    continue
                if member.isreg() and written + member.size > cap:
                    skipped.append(
                        f"{where} ({member.size} bytes: the copy is capped at {cap_mb} MB, "
                        "AUTOENVSCALING_MAX_DOWNLOAD_MB)"
                    )
                    continue
                # `member` is data_filter's output already: filtering it again doubles the cost
                # (a realpath per member) and changes nothing.
                try:
                    if member.isdir():  # modes last: a read-only folder still gets its files
                        folders.append((dest / member.name, member.mode or 0o755))
                        tar.extract(member, dest, set_attrs=False, filter="fully_trusted")
                    else:
                        tar.extract(member, dest, filter="fully_trusted")
                except (OSError, tarfile.TarError, KeyError) as exc:
                    skipped.append(f"{where} (not extracted: {exc})")
                    continue
                written += member.size if member.isreg() else 0
    except _StreamCapError:
        skipped.append(
            f"{path}: everything after the first {READ_CAP_FACTOR * cap_mb} MB of the archive "
            "(not read)"
        )
    finally:
        reader.close()
    for folder, mode in reversed(folders):
        try:
            os.chmod(folder, mode)
        except OSError:
            pass
    is_dir = bool(stat.get("mode", 0) & (1 << 31))  # Go's os.ModeDir
    return stat["name"], is_dir, skipped


def _why(error: tarfile.FilterError) -> str:
    """A filter refusal in words: which kind of entry, and that it is not copied."""
    kinds = {
        "AbsoluteLinkError": "a link to an absolute path",
        "LinkOutsideDestinationError": "a link out of the folder",
        "SpecialFileError": "a device, FIFO or socket",
        "AbsolutePathError": "an absolute path",
        "OutsideDestinationError": "a path out of the folder",
    }
    return f"{kinds.get(type(error).__name__, type(error).__name__)}: not copied"
