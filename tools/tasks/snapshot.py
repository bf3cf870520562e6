"""Content hashes and frozen copies of task folders: admission is bound to the bytes checked.

`content_hash` covers every file's relative path, executable bit and bytes (and symlinks by their
target), so any edit, added or removed file changes it. `freeze` copies a folder out of reach of
whoever wrote it and returns the copy's hash, so what the gate checks, what the pool stores and
what the verdict names can be compared.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import uuid
from pathlib import Path

CHUNK = 1 << 20


class SnapshotError(RuntimeError):
    """A folder could not be hashed or copied (it vanished, or holds something not a file)."""


def _name_bytes(text: str) -> bytes:
    # File names that are not UTF-8 reach Python as surrogate escapes: hash their real bytes.
    return text.encode("utf-8", "surrogateescape")


def content_hash(folder: Path | str) -> str:
    """sha256 over (relative path, kind, exec bit, bytes) of everything under `folder`."""
    root = Path(folder)
    if not root.is_dir():
        raise SnapshotError(f"{root}: not a folder; nothing to hash")
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*"), key=lambda p: p.relative_to(root).as_posix()):
        rel = path.relative_to(root).as_posix()
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            digest.update(_name_bytes(f"L\0{rel}\0{os.readlink(path)}\0"))
        elif stat.S_ISDIR(mode):
            digest.update(_name_bytes(f"D\0{rel}\0"))
        elif stat.S_ISREG(mode):
            digest.update(_name_bytes(f"F\0{rel}\0{int(bool(mode & stat.S_IXUSR))}\0"))
            with open(path, "rb") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
            digest.update(b"\0")
        else:
            digest.update(_name_bytes(f"O\0{rel}\0{stat.S_IFMT(mode)}\0"))
    return f"sha256:{digest.hexdigest()}"


def freeze(source: Path | str, dest: Path | str) -> str:
    """Copy `source` to `dest` (replacing an earlier copy) and return the copy's content hash."""
    source, dest = Path(source), Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.parent / f".{dest.name}.{uuid.uuid4().hex[:6]}.tmp"
    try:
        shutil.copytree(source, tmp, symlinks=True)
    except (OSError, shutil.Error) as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise SnapshotError(f"could not copy {source}: {exc}") from exc
    if dest.exists():
        shutil.rmtree(dest)
    os.replace(tmp, dest)
    return content_hash(dest)
