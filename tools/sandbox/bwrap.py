"""Daemonless, registry-free sandboxes with bubblewrap over a cached base rootfs.

One sandbox is one *holder* process: `unshare` gives it a private mount namespace in which a
per-sandbox overlay (base rootfs + the task's built layer + a writable upper dir) is mounted, then
`bwrap` pivots into it with fresh pid/ipc/uts (and, unless building, network) namespaces and sleeps.
Every command enters those namespaces with `nsenter`, so processes, files and limits behave like
`docker exec` into one container, and the mount vanishes with the holder: nothing leaks on a crash.
Files move in and out as tar streams run *inside* the sandbox, so a symlink planted by an agent can
never redirect a copy onto the host.
"""

from __future__ import annotations

import asyncio
import fcntl
import io
import json
import os
import shlex
import shutil
import signal
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, Field

from autoenvscaling.tools.sandbox import cgroups
from autoenvscaling.tools.sandbox.base import (
    BuildError,
    ExecOutput,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxRef,
)
from autoenvscaling.tools.sandbox.dockerfile import BuildPlan, parse_dockerfile
from autoenvscaling.tools.sandbox.rootfs import ensure_base_rootfs, map_base_image
from autoenvscaling.tools.sandbox.shell import (
    PersistentShell,
    _Pending,
    host_descendants,
    kill_host_descendants,
    wait_exit,
)
from autoenvscaling.tools.settings import get_settings

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Docker's default capability set: root in the sandbox can chown and setuid, but cannot mount,
# load modules or reach host devices.
DOCKER_CAPS = (
    "chown,dac_override,fowner,fsetid,kill,setgid,setuid,setpcap,net_bind_service,net_raw,"
    "sys_chroot,mknod,audit_write,setfcap"
)
Log = Callable[[str], None]


class BwrapImage(BaseModel):
    """A built environment: overlay lower layers (lowest first) and the config the image sets."""

    id: str
    layers: list[Path]
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str = "/"
    user: str | None = None
    notes: list[str] = Field(default_factory=list)


def _start_time(pid: int) -> str | None:
    """The process's start time (guards against pid reuse); None once it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def _kill_tree(pid: int) -> None:
    """SIGKILL a process and all its descendants, parents first so none can react."""
    tree = host_descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for child in [pid, *tree]:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def _collect(stream: asyncio.StreamReader | None, pending: _Pending) -> None:
    if stream is not None:
        while chunk := await stream.read(65536):
            pending.add(chunk)


# A command is done when its process exits; a background child it left behind (`server &`) may
# hold the pipes open, so its output is only awaited this long after the exit.
PIPE_GRACE_SEC = 0.5


class BwrapSandbox(Sandbox):
    """A live bwrap sandbox. Start with `start()`, or `attach()` to one another process started."""

    def __init__(self, ref: SandboxRef, *, owner: bool, holder: asyncio.subprocess.Process | None):
        self.ref = ref
        self._owner = owner
        self._holder = holder
        self._shells: list[PersistentShell] = []
        self._closed = False

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    async def start(
        cls,
        image: BwrapImage,
        *,
        limits: SandboxLimits | None = None,
        network: bool = False,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        upper_dir: Path | None = None,
        name: str | None = None,
        binds: list[tuple[Path, str]] | None = None,
    ) -> BwrapSandbox:
        """Start a holder over `image`. `upper_dir` keeps the writable layer (used by builds).

        `binds` are (host folder, sandbox path) pairs mounted read-write, e.g. a proposer's
        candidate folder at /workspace/task, so files written on the host run in the sandbox.
        """
        for tool in ("bwrap", "unshare", "nsenter"):
            if not shutil.which(tool):
                raise SandboxError(
                    f"{tool} is not installed (apt-get install bubblewrap util-linux)"
                )
        limits = limits or SandboxLimits()
        await asyncio.to_thread(sweep_stale)
        sandbox_id = name or f"aes-{uuid.uuid4().hex[:12]}"
        run_dir = get_settings().runtime_dir / sandbox_id
        upper = upper_dir or run_dir / "upper"
        work = upper.parent / f"{upper.name}.work"
        mnt = run_dir / "root"
        for folder in (upper, work, mnt):
            folder.mkdir(parents=True, exist_ok=True)
        groups = cgroups.create(sandbox_id, limits.memory_mb, limits.pids)
        lower = ":".join(str(layer) for layer in reversed(image.layers))
        bwrap = [
            "bwrap",
            "--bind",
            str(mnt),
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--hostname",
            "sandbox",
            "--die-with-parent",
        ]
        for host, target in binds or []:
            host = Path(host).resolve()
            if not host.is_dir():
                raise SandboxError(f"bind: {host} is not a folder on the host; create it first")
            if not target.startswith("/") or ".." in Path(target).parts:
                raise SandboxError(f"bind: {target!r} must be an absolute path without '..'")
            # After the root bind, so it lands inside the new root; bwrap creates the mount point.
            bwrap += ["--bind", str(host), target]
        if network:
            if Path("/etc/resolv.conf").exists():
                bwrap += ["--ro-bind", "/etc/resolv.conf", "/etc/resolv.conf"]
        else:
            bwrap.append("--unshare-net")
        inner = (
            f"mount -t overlay overlay -o lowerdir={lower},upperdir={upper},workdir={work} {mnt}"
            f" && exec {shlex.join(bwrap)} -- sleep infinity"
        )
        join = "".join(f"echo $$ > {shlex.quote(str(f))}; " for f in groups.procs_files)
        script = f"{join}exec unshare --mount --propagation private -- sh -c {shlex.quote(inner)}"
        holder = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            script,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        (run_dir / "holder.json").write_text(
            json.dumps({"pid": holder.pid, "start_time": _start_time(holder.pid)})
        )
        target = await cls._wait_for_target(holder)
        ref = SandboxRef(
            backend="bwrap",
            id=sandbox_id,
            workdir=workdir or image.workdir,
            env={**image.env, **(env or {})},
            user=image.user,
            limits=limits,
            network=network,
            handle={
                "holder_pid": holder.pid,
                "target_pid": target,
                "start_time": _start_time(target),
                "run_dir": str(run_dir),
                "cgroups": [str(p) for p in groups.paths],
                "drop_caps": any((layer / "usr/bin/setpriv").exists() for layer in image.layers),
                "keep_upper": upper_dir is not None,
            },
        )
        sandbox = cls(ref, owner=True, holder=holder)
        # Always present, like in a container; the agent's output folders live here.
        await sandbox.exec("mkdir -p /tmp && chmod 1777 /tmp", timeout_sec=30)
        return sandbox

    @staticmethod
    async def _wait_for_target(holder: asyncio.subprocess.Process) -> int:
        """The sandboxed `sleep` (pid 2 in the sandbox) is what commands `nsenter` into."""
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if holder.returncode is not None:
                break
            for pid in host_descendants(holder.pid):
                try:
                    if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                        return pid
                except OSError:
                    continue
            await asyncio.sleep(0.01)
        _kill_tree(holder.pid)
        err = b""
        if holder.stderr:
            try:
                err = await asyncio.wait_for(holder.stderr.read(), 2)
            except TimeoutError:
                pass
        raise SandboxError(f"the sandbox did not start: {err.decode(errors='replace').strip()}")

    @classmethod
    async def attach(cls, ref: SandboxRef) -> BwrapSandbox:
        target = int(ref.handle["target_pid"])
        if _start_time(target) != ref.handle.get("start_time"):
            raise SandboxError(f"sandbox {ref.id} is not running any more")
        return cls(ref, owner=False, holder=None)

    async def close(self) -> None:
        """Owner: stop every process and delete the overlay. Attached: close own shells only."""
        if self._closed:
            return
        self._closed = True
        for shell in self._shells:
            await shell.close()
        if not self._owner:
            return
        _kill_tree(int(self.ref.handle["holder_pid"]))
        if self._holder is not None:
            try:
                await asyncio.wait_for(self._holder.wait(), 10)
            except TimeoutError:
                pass
        cgroups.destroy(cgroups.CgroupSet(paths=[Path(p) for p in self.ref.handle["cgroups"]]))
        run_dir = Path(self.ref.handle["run_dir"])
        await asyncio.to_thread(shutil.rmtree, run_dir, True)

    # -- entering the sandbox ------------------------------------------------------------------
    def _argv(self, argv: list[str], *, user: str | int | None = None) -> list[str]:
        handle = self.ref.handle
        prefix: list[str] = []
        join = "".join(f"echo $$ > {shlex.quote(p + '/cgroup.procs')}; " for p in handle["cgroups"])
        if join:
            prefix = ["sh", "-c", f'{join}exec "$@"', "sh"]
        enter = [
            "nsenter",
            "-t",
            str(handle["target_pid"]),
            "-m",
            "-u",
            "-i",
            "-n",
            "-p",
            "-r",
            "-w",
            "--",
        ]
        if handle.get("drop_caps"):
            enter += [
                "setpriv",
                f"--bounding-set=-all,{','.join('+' + c for c in DOCKER_CAPS.split(','))}",
                "--",
            ]
        user = user if user is not None else self.ref.user
        if user not in (None, "", "root", "0", 0):
            if isinstance(user, int) or str(user).isdigit():
                enter += ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", "--"]
            else:
                enter += ["runuser", "-u", str(user), "--"]
        return prefix + enter + argv

    def _env(self, env: dict[str, str] | None) -> dict[str, str]:
        merged = {"PATH": DEFAULT_PATH, "HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm"}
        merged.update(self.ref.env)
        merged.update(env or {})
        return merged

    async def _spawn(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
        stdin: int | None = asyncio.subprocess.DEVNULL,
        merge_stderr: bool = False,
    ) -> asyncio.subprocess.Process:
        if self._closed:
            raise SandboxError(f"sandbox {self.ref.id} is closed")
        return await asyncio.create_subprocess_exec(
            *self._argv(argv, user=user),
            env=self._env(env),
            stdin=stdin,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT if merge_stderr else asyncio.subprocess.PIPE,
            start_new_session=True,
        )

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
        stdin: bytes | None = None,
    ) -> ExecOutput:
        script = f"cd {shlex.quote(cwd or self.ref.workdir)} || exit 1\n{command}"
        started = time.monotonic()
        proc = await self._spawn(
            ["bash", "-c", script],
            env=env,
            user=user,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        )
        cap = self.ref.limits.output_bytes

        out, err = _Pending(cap), _Pending(cap)
        readers = asyncio.gather(_collect(proc.stdout, out), _collect(proc.stderr, err))
        # A cancelled read (pipes held open by a background child) must not log an error later.
        readers.add_done_callback(lambda f: f.cancelled() or f.exception())

        async def run() -> None:
            if stdin is not None and proc.stdin is not None:
                proc.stdin.write(stdin)
                await proc.stdin.drain()
                proc.stdin.close()
            await wait_exit(proc)

        def drained() -> tuple[str, str, bool]:
            (stdout, _, t1), (stderr, _, t2) = out.take(), err.take()
            return stdout, stderr, t1 or t2

        async def finish_reading() -> None:
            try:
                await asyncio.wait_for(asyncio.shield(readers), PIPE_GRACE_SEC)
            except TimeoutError:
                readers.cancel()

        try:
            await asyncio.wait_for(run(), timeout_sec)
        except TimeoutError:
            # Kill the whole tree (children that called setsid included), then keep what it printed.
            _kill_tree(proc.pid)
            await finish_reading()
            stdout, stderr, truncated = drained()
            return ExecOutput(
                exit_code=None,
                stdout=stdout,
                stderr=stderr,
                timed_out=True,
                duration_sec=time.monotonic() - started,
                truncated=truncated,
            )
        except BaseException:
            _kill_tree(proc.pid)
            readers.cancel()
            raise
        await finish_reading()
        stdout, stderr, truncated = drained()
        return ExecOutput(
            exit_code=proc.returncode,
            stdout=stdout,
            stderr=stderr,
            duration_sec=time.monotonic() - started,
            truncated=truncated,
        )

    async def open_shell(
        self,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
        output_cap: int = 64_000,
    ) -> PersistentShell:
        async def spawn() -> asyncio.subprocess.Process:
            return await self._spawn(
                ["bash", "--noprofile", "--norc"],
                env=env,
                user=user,
                stdin=asyncio.subprocess.PIPE,
                merge_stderr=True,
            )

        shell = await PersistentShell.start(
            spawn,
            interrupt=kill_host_descendants,
            output_cap=output_cap,
            cwd=cwd or self.ref.workdir,
        )
        self._shells.append(shell)
        return shell

    # -- files ---------------------------------------------------------------------------------
    async def upload(self, source: Path, target: str) -> None:
        source = Path(source)
        if not source.exists():
            raise SandboxError(f"upload: {source} does not exist")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            if source.is_dir():
                dest = target
                for child in sorted(source.iterdir()):
                    tar.add(child, arcname=child.name)
            else:
                dest = os.path.dirname(target.rstrip("/")) or "/"
                tar.add(source, arcname=os.path.basename(target.rstrip("/")))
        result = await self.exec(
            f"mkdir -p {shlex.quote(dest)} && tar -x --no-same-owner -C {shlex.quote(dest)}",
            cwd="/",
            user="root",
            stdin=buffer.getvalue(),
            timeout_sec=300,
        )
        if result.exit_code != 0:
            raise SandboxError(
                f"upload to {target} failed: {(result.stderr or result.stdout)[-500:]}"
            )

    async def download(self, source: str, target: Path) -> None:
        target = Path(target)
        probe = await self.exec(f"test -d {shlex.quote(source)}", cwd="/", user="root")
        is_dir = probe.exit_code == 0
        parent, name = (
            os.path.dirname(source.rstrip("/")) or "/",
            os.path.basename(source.rstrip("/")),
        )
        tar_cmd = (
            f"tar -c -C {shlex.quote(source)} ."
            if is_dir
            else f"tar -c -C {shlex.quote(parent)} -- {shlex.quote(name)}"
        )
        proc = await self._spawn(["bash", "-c", tar_cmd], user="root")
        data, err = await proc.communicate()
        if proc.returncode != 0:
            raise SandboxError(
                f"download of {source} failed: {err.decode(errors='replace')[-500:]}"
            )
        with tempfile.TemporaryDirectory() as tmp:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r") as tar:
                tar.extractall(tmp, filter="data")  # refuses links and paths that leave tmp
            if is_dir:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copytree(tmp, target, dirs_exist_ok=True, symlinks=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(os.path.join(tmp, name), target)


def sweep_stale() -> list[str]:
    """Delete the overlay folders of sandboxes whose holder died without cleaning up (a crash)."""
    removed = []
    root = get_settings().runtime_dir
    if not root.is_dir():
        return removed
    for run_dir in root.iterdir():
        marker = run_dir / "holder.json"
        try:
            holder = json.loads(marker.read_text())
        except (OSError, ValueError):
            continue  # starting right now, or not ours
        if _start_time(int(holder["pid"])) != holder.get("start_time"):
            shutil.rmtree(run_dir, ignore_errors=True)
            removed.append(run_dir.name)
    return removed


# -- building images ---------------------------------------------------------------------------
def _layers_dir() -> Path:
    return get_settings().cache_dir / "layers"


async def build_image(
    environment_dir: Path,
    *,
    docker_image: str | None = None,
    force: bool = False,
    timeout_sec: float = 600,
    log: Log | None = None,
) -> BwrapImage:
    """Build `environment/Dockerfile` into a cached overlay layer (content-hashed; reused)."""
    say = log or (lambda _msg: None)
    dockerfile = environment_dir / "Dockerfile"
    if not dockerfile.exists():
        if not docker_image:
            raise BuildError(f"{environment_dir}: no Dockerfile and no docker_image")
        base = await asyncio.to_thread(map_base_image, docker_image)
        say(base.note)
        return BwrapImage(id=f"base-{base.rootfs.name}", layers=[base.rootfs], notes=[base.note])
    plan = parse_dockerfile(dockerfile, environment_dir)
    base = await asyncio.to_thread(map_base_image, plan.base_image)
    say(base.note)
    for note in plan.notes:
        say(note)
    key = f"{base.rootfs.name}-{plan.content_hash[:24]}"
    final = _layers_dir() / key
    meta = final / "image.json"
    if meta.exists() and not force:
        return BwrapImage.model_validate_json(meta.read_text())
    final.parent.mkdir(parents=True, exist_ok=True)
    lock_path = final.parent / f"{key}.lock"
    with open(lock_path, "w") as lock:  # noqa: ASYNC230 - creating an empty lock file
        await asyncio.to_thread(fcntl.flock, lock, fcntl.LOCK_EX)  # same task built in parallel
        if meta.exists() and not force:
            return BwrapImage.model_validate_json(meta.read_text())
        tmp = final.parent / f"{key}.tmp-{uuid.uuid4().hex[:6]}"
        try:
            image = await _run_build(plan, base.rootfs, environment_dir, tmp, timeout_sec, say)
            image = image.model_copy(
                update={"notes": [base.note, *plan.notes], "layers": [base.rootfs, final / "upper"]}
            )
            (tmp / "image.json").write_text(image.model_dump_json(indent=2))
            shutil.rmtree(tmp / "upper.work", ignore_errors=True)
            shutil.rmtree(final, ignore_errors=True)
            tmp.rename(final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return image


async def _run_build(
    plan: BuildPlan, base: Path, context: Path, tmp: Path, timeout_sec: float, say: Log
) -> BwrapImage:
    deadline = time.monotonic() + timeout_sec
    scratch = BwrapImage(id="build", layers=[base])
    limits = SandboxLimits(memory_mb=4096, pids=4096, output_bytes=200_000)
    sandbox = await BwrapSandbox.start(
        scratch, limits=limits, network=True, upper_dir=tmp / "upper", workdir="/"
    )
    try:
        for step in plan.steps:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BuildError(
                    f"Dockerfile line {step.line}: build timed out after {timeout_sec:.0f} s"
                )
            if step.kind == "WORKDIR":
                await sandbox.exec(f"mkdir -p {shlex.quote(step.dest)}", cwd="/", user="root")
            elif step.kind == "RUN":
                say(f"RUN {step.command[:200]}")
                result = await sandbox.exec(
                    step.command,
                    cwd=step.workdir,
                    env=step.env,
                    user=step.user,
                    timeout_sec=remaining,
                )
                if result.exit_code != 0:
                    why = (
                        "timed out" if result.timed_out else f"exited with code {result.exit_code}"
                    )
                    tail = (result.stdout + result.stderr)[-1500:]
                    raise BuildError(f"Dockerfile line {step.line}: RUN {why}:\n{tail}")
            elif step.kind == "COPY":
                await sandbox.exec(f"mkdir -p {shlex.quote(step.workdir)}", cwd="/", user="root")
                for pattern in step.sources:
                    for source in sorted(context.glob(pattern)) or [context / pattern]:
                        into_dir = (
                            step.dest.endswith("/") or len(step.sources) > 1 or source.is_dir()
                        )
                        dest = (
                            step.dest.rstrip("/") + "/" + source.name
                            if into_dir and not source.is_dir()
                            else step.dest.rstrip("/") or "/"
                        )
                        await sandbox.upload(source, dest)
                        fixups = []
                        if step.chown:
                            fixups.append(f"chown -R {shlex.quote(step.chown)} {shlex.quote(dest)}")
                        if step.chmod:
                            fixups.append(f"chmod -R {shlex.quote(step.chmod)} {shlex.quote(dest)}")
                        if fixups:
                            result = await sandbox.exec(" && ".join(fixups), cwd="/", user="root")
                            if result.exit_code != 0:
                                raise BuildError(
                                    f"Dockerfile line {step.line}: {result.stderr[-500:]}"
                                )
    finally:
        await sandbox.close()
    return BwrapImage(
        id=plan.content_hash[:24], layers=[], env=plan.env, workdir=plan.workdir, user=plan.user
    )


async def start_workspace(
    *,
    limits: SandboxLimits | None = None,
    network: bool = False,
    workdir: str = "/workspace",
    env: dict[str, str] | None = None,
    binds: list[tuple[Path, str]] | None = None,
) -> BwrapSandbox:
    """A bare sandbox on the base rootfs: the proposer's own terminal workspace.

    `binds`: (host folder, sandbox path) pairs mounted read-write (see `BwrapSandbox.start`).
    """
    base = await asyncio.to_thread(ensure_base_rootfs)
    image = BwrapImage(id="workspace", layers=[base], workdir=workdir)
    sandbox = await BwrapSandbox.start(image, limits=limits, network=network, env=env, binds=binds)
    await sandbox.exec(f"mkdir -p {shlex.quote(workdir)}", cwd="/", user="root")
    return sandbox
