"""The engine's archive calls (`put_archive`, `get_archive`) through `tar` run by an exec, for a
runtime whose root the engine's own copier cannot reach.

Under runsc podman's copier works in the mount namespace of the runsc sandbox process, not in
gVisor's view of the container: an upload fails ("mkdir /solution: read-only file system") and
a download of a file the sandbox wrote finds nothing (404). Measured with podman 4.3.1 and runsc
0.0~20221219; with 0.0~20240729 a file written inside lives in gVisor's own overlay of `/`, which
the host never sees. Here the same calls run `tar` inside the sandbox as root through the engine's
CLI (`exec -i`, from `/`), so archives.py keeps one code path: it streams, caps and filters the
tar exactly as it does the engine's. Needs `tar` in the image (Debian's and the seed images
have it).
"""

from __future__ import annotations

import posixpath
import subprocess
from collections.abc import Iterator
from typing import IO, Any

import docker.errors

from .engine import cli_argv

CHUNK = 64 * 1024
#: Go's os.ModeDir, as the engine's archive stat reports a folder.
MODE_DIR = 1 << 31
TAR_SEC = 600


class _Missing(docker.errors.NotFound):
    def __init__(self, message: str) -> None:
        super().__init__(message)


class ExecArchive:
    """`put_archive` / `get_archive` with the engine API's signatures, through `exec tar`."""

    def __init__(self, backend: Any) -> None:
        self._argv, self._env = cli_argv(backend)

    def _exec(self, container_id: str, script: str, *args: str) -> list[str]:
        return [
            *self._argv,
            "exec",
            "-i",
            "-u",
            "0",
            # From /, not the image's WORKDIR: a copy into the workdir's parent may have emptied
            # it first (Harbor's artifact upload), and runsc will not start an exec whose
            # working directory is gone (runc's engine copies never exec at all).
            "-w",
            "/",
            container_id,
            "sh",
            "-c",
            script,
            "aes",
            *args,
        ]

    def put_archive(self, container_id: str, path: str, data: IO[bytes]) -> bool:
        done = subprocess.run(
            self._exec(container_id, 'test -d "$1" || exit 44; exec tar -x -C "$1" -f -', path),
            stdin=data,
            env=self._env,
            capture_output=True,
            timeout=TAR_SEC,
            check=False,
        )
        if done.returncode == 44:
            raise _Missing(f"{path} is not a folder in the sandbox")
        if done.returncode != 0:
            raise OSError(f"tar into {path} exited {done.returncode}: {done.stderr[-500:]!r}")
        return True

    def get_archive(self, container_id: str, path: str) -> tuple[_Chunks, dict[str, Any]]:
        kind = subprocess.run(
            self._exec(
                container_id, 'if [ -d "$1" ]; then echo d; elif [ -e "$1" ]; then echo f; fi', path
            ),
            env=self._env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stdout.strip()
        if kind not in ("d", "f"):
            raise _Missing(f"{path}: no such file or directory")
        parent = posixpath.dirname(path.rstrip("/")) or "/"
        name = posixpath.basename(path.rstrip("/")) or "/"
        proc = subprocess.Popen(
            self._exec(container_id, 'exec tar -c -C "$1" -f - -- "$2"', parent, name),
            env=self._env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        return _Chunks(proc), {"name": name, "mode": MODE_DIR if kind == "d" else 0o644}


class _Chunks:
    """The tar's bytes as the SDK's chunk iterator; `close` ends the tar (a capped read)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    def __iter__(self) -> Iterator[bytes]:
        assert self._proc.stdout is not None
        while chunk := self._proc.stdout.read(CHUNK):
            yield chunk

    def close(self) -> None:
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
