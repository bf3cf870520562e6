"""A bare workspace sandbox on any Harbor environment type, and a host folder mirrored into it.

Our engines give the proposer a workspace container with the candidate folder bind-mounted in.
A Harbor type (a cloud provider) has no bind mounts: `start_harbor_workspace` starts one of its
environments from a one-line Dockerfile, and `FolderSyncShell` keeps a host folder and a folder in
that sandbox the same at command boundaries: the host's copy goes in (tar, `upload_file`) before a
command when it changed since the last sync, the sandbox's comes back (tar, `download_file`)
after each command that finished. What comes back is hostile: it is unpacked with the standard
library's `data` filter (no absolute paths, no links out of the folder, no devices or FIFOs, no
setuid bits), members it refuses are dropped and named, and a folder over `MAX_SYNC_BYTES` is not
copied back at all. Host edits made while a command ran (the filesystem tools) win over the
sandbox's copy of the same path.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import tarfile
import tempfile
import uuid
from pathlib import Path
from typing import Any

from harbor.environments.factory import EnvironmentFactory
from harbor.models.task.config import EnvironmentConfig as TaskEnvironment
from harbor.models.task.config import NetworkMode, NetworkPolicy
from harbor.models.trial.paths import TrialPaths

from .base import SandboxError, SandboxLimits, Shell
from .harbor_backends import ENVIRONMENTS, environment_config
from .shell import ShellResult

#: The workspace image on a Harbor type: a tag the seed pool's FROM lines use (here our Debian
#: base is tagged so; a provider pulls it from Docker Hub).
WORKSPACE_IMAGE = "python:3.12-slim-bookworm"
MAX_SYNC_BYTES = 64 * 1024 * 1024


async def start_harbor_workspace(
    backend: str,
    options: dict[str, Any] | None = None,
    *,
    limits: SandboxLimits | None = None,
    workdir: str = "/workspace",
    image: str = WORKSPACE_IMAGE,
) -> Any:
    """A started Harbor environment of `backend` (`harbor:<type>`, options passed through as for
    trials) with no network (a type that cannot enforce that is refused); the caller stops it (`stop(delete=True)`) and removes
    `environment.aes_scratch`."""
    os.environ.setdefault("HARBOR_TELEMETRY", "0")

    limits = limits or SandboxLimits()
    config = environment_config(backend, options, ours=ENVIRONMENTS)
    scratch = Path(tempfile.mkdtemp(prefix="aes-workspace-"))
    context = scratch / "environment"
    context.mkdir()
    (context / "Dockerfile").write_text(
        f"FROM {image}\nRUN mkdir -p {workdir}\nWORKDIR {workdir}\n"
    )
    paths = TrialPaths(trial_dir=scratch / "trial")
    paths.mkdir()
    task_env = TaskEnvironment(
        network_mode=NetworkMode.NO_NETWORK,
        allow_internet=False,
        cpus=limits.cpus,
        memory_mb=limits.memory_mb,
        workdir=workdir,
    )
    try:
        environment = EnvironmentFactory.create_environment_from_config(
            config=config,
            environment_dir=context,
            environment_name="workspace",
            session_id=f"workspace-{uuid.uuid4().hex[:12]}",
            trial_paths=paths,
            task_env_config=task_env,
            # A type that cannot enforce it refuses here (Harbor's check), naming the type.
            network_policy=NetworkPolicy(network_mode=NetworkMode.NO_NETWORK),
        )
        setattr(environment, "aes_scratch", scratch)  # noqa: B010 - removed by stop_harbor_workspace
        await environment.start(force_build=False)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return environment


async def stop_harbor_workspace(environment: Any) -> None:
    try:
        await environment.stop(delete=True)
    finally:
        shutil.rmtree(getattr(environment, "aes_scratch", ""), ignore_errors=True)


def fingerprint(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under `root` (links not followed): kind, size, mtime."""
    seen: dict[str, tuple[str, int, int]] = {}
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in [*dirs, *files]:
            path = Path(folder, name)
            st = path.lstat()
            kind = "l" if path.is_symlink() else "d" if path.is_dir() else "f"
            seen[path.relative_to(root).as_posix()] = (kind, st.st_size, st.st_mtime_ns)
    return seen


class FolderSyncShell:
    """`shell` (over `environment`'s exec) with host folder `local` mirrored at `remote`."""

    def __init__(self, shell: Shell, environment: Any, local: Path, remote: str) -> None:
        self.inner = shell
        self.sandbox = shell.sandbox
        self._environment = environment
        self._local = Path(local)
        self._remote = remote
        self._tar = f"/tmp/.aes-sync-{secrets.token_hex(6)}.tar"
        self._synced: dict[str, tuple[str, int, int]] | None = None  # None: never pushed

    @property
    def busy(self) -> bool:
        return self.inner.busy

    async def run(self, command: str, timeout_sec: float | None = 120) -> ShellResult:
        if not self.inner.busy and fingerprint(self._local) != self._synced:
            await self.push()
        return await self._pulled(await self.inner.run(command, timeout_sec))

    async def read(self, timeout_sec: float = 10) -> ShellResult:
        return await self._pulled(await self.inner.read(timeout_sec))

    async def interrupt(self, grace_sec: float = 3) -> ShellResult:
        return await self._pulled(await self.inner.interrupt(grace_sec))

    async def close(self) -> None:
        await self.inner.close()

    async def __aenter__(self) -> FolderSyncShell:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _root(self, script: str) -> str:
        done = await self._environment.exec(f"bash -c {shlex.quote(script)}", user="root")
        if done.return_code != 0:
            detail = ((done.stdout or "") + (done.stderr or "")).strip()[-300:]
            raise SandboxError(f"folder sync failed (exit {done.return_code}): {detail}")
        return done.stdout or ""

    async def push(self) -> None:
        """The host folder's copy replaces the sandbox's."""
        with tempfile.TemporaryDirectory(prefix="aes-sync-") as scratch:
            archive = Path(scratch, "in.tar")
            with tarfile.open(archive, "w") as tar:
                tar.add(self._local, arcname=".")
            await self._environment.upload_file(archive, self._tar)
        remote, tar = shlex.quote(self._remote), shlex.quote(self._tar)
        await self._root(
            f"mkdir -p {remote} && find {remote} -mindepth 1 -delete && "
            f"tar -xf {tar} -C {remote} --no-same-owner; rc=$?; rm -f {tar}; exit $rc"
        )
        self._synced = fingerprint(self._local)

    async def _pulled(self, result: ShellResult) -> ShellResult:
        if result.running or result.idle:
            return result
        note = await self.pull()
        return result.model_copy(update={"output": result.output + note}) if note else result

    async def pull(self) -> str:
        """The sandbox's copy replaces the host's (host edits since the last sync win); returns
        a note for the model when something was not copied back."""
        remote, tar = shlex.quote(self._remote), shlex.quote(self._tar)
        size = await self._root(f"tar -cf {tar} -C {remote} . && wc -c < {tar}")
        if int(size.strip().split()[-1] or 0) > MAX_SYNC_BYTES:
            await self._root(f"rm -f {tar}")
            return (
                f"\n[the task folder is over {MAX_SYNC_BYTES // 2**20} MB in the sandbox: "
                "not copied back; remove large files]\n"
            )
        parent = self._local.parent
        with tempfile.TemporaryDirectory(prefix=".aes-sync-", dir=parent) as scratch:
            archive, fresh = Path(scratch, "out.tar"), Path(scratch, "tree")
            await self._environment.download_file(self._tar, archive)
            await self._root(f"rm -f {tar}")
            dropped = _unpack(archive, fresh)
            self._keep_host_edits(fresh)
            for child in list(self._local.iterdir()):
                _remove(child)
            for child in list(fresh.iterdir()):
                os.replace(child, self._local / child.name)
        self._synced = fingerprint(self._local)
        if dropped:
            return (
                f"\n[not copied back from the sandbox (unsafe entries): {', '.join(dropped[:5])}]\n"
            )
        return ""

    def _keep_host_edits(self, fresh: Path) -> None:
        """Paths the host changed since the last sync (edited while a command ran) win."""
        if self._synced is None:
            return
        now = fingerprint(self._local)
        for rel in sorted(set(now) | set(self._synced)):
            if now.get(rel) == self._synced.get(rel) or (now.get(rel) or ("d",))[0] == "d":
                continue
            target = fresh / rel
            if target.exists() or target.is_symlink():
                _remove(target)
            if rel in now:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(self._local / rel, target, follow_symlinks=False)


def _unpack(archive: Path, dest: Path) -> list[str]:
    """Members `tarfile.data_filter` accepts, unpacked into `dest`; the names it refused."""
    dest.mkdir()
    dropped: list[str] = []
    with tarfile.open(archive) as tar:
        for member in tar:
            try:
                safe = tarfile.data_filter(member, str(dest))
            except tarfile.FilterError:
                dropped.append(member.name)
                continue
            if safe is not None:
                tar.extract(safe, dest, filter="data")
    return dropped


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
