"""The sandbox contract on a container engine (podman or docker, through the `docker` SDK).

One sandbox is one container of the hardened profile (`profile.py`): no network, `--init` as
PID 1 so orphans are reaped, and a shell-builtin loop reading stdin as the main process. The
owning process holds that stdin open through an attach socket (`StdinOnce`): when the owner
exits, even by SIGKILL, stdin closes, the main process ends and `auto_remove` deletes the
container. `cleanup.cleanup_stale()` is the backstop, run at each process's first start.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import time
import uuid
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

import docker.errors

from ..settings import get_settings
from . import archives, layerfs, profile, runtimes, streams
from .base import (
    Backend,
    ExecOutput,
    Sandbox,
    SandboxError,
    SandboxLimitError,
    SandboxLimits,
    SandboxRef,
)
from .bases import require_base
from .cleanup import labels as our_labels
from .cleanup import remove_container, sweep_once
from .control import EXEC_MARK, ControlChannel, exec_output
from .engine import call, cli_argv, client, engine_url, inspect_image
from .image_gc import sweep_stale_images_once
from .layercap import watch
from .netns import SANDBOX_NETWORK, check_network
from .proctree import KILL_TREE, exec_quiet, kill_tree_host
from .shell import PendingOutput, PersistentShell

SHELL_MARK = "AUTOENVSCALING_SHELL"
# Shell builtins only, so it runs in any image with /bin/sh: it ends when stdin closes.
KEEPALIVE = "while read -r _; do :; done"
# podman's exec API starts the process before its output stream is attached: a command's first
# output was lost in 4-12% of short execs on a loaded 2-core machine (the tests' PASS printed,
# the reward read right after it empty). So the command waits for a line on its stdin, sent once
# the stream is attached (`streams.pump`), and then runs with an empty stdin as before.
AFTER_ATTACH = 'read -r _ || exit 125; unset SHLVL; exec bash -c "$1" </dev/null'

#: Who the container's init and keep-alive run as: not root and no user a task or an agent runs
#: as, so a root agent (no CAP_SYS_PTRACE) can neither ptrace them nor write their memory
#: through /proc/<pid>/mem (the kernel's ptrace check wants the same uid or that capability).
#: They only wait and reap, which needs no privilege. Commands run as root unless told.
#: podman only: docker derives an exec's capabilities from the container's user, so there they
#: stay root (and a root agent could ptrace them).
KEEPER_USER = "2147483646:2147483646"  # KEEPER_UID below


KEEPER_UID = 2147483646


def _confine_layer(api: Any, container_id: str, disk_mb: int | None) -> str:
    """What caps the writable layer: a filesystem of its own, else (saying why) measurement."""
    if not disk_mb:
        return "none"
    try:
        return layerfs.confine(api, container_id, disk_mb)
    except layerfs.NotConfinedError as exc:
        return f"measured ({exc})"


def _workdir_to_root(inspected: dict[str, Any], workdir: str) -> None:
    """The engine creates a WORKDIR the image lacks owned by the container's user, the keeper:
    give it (and the parents it made) to root, as it was before the keeper. Host side, through
    the running container's merged root; nothing but the keeper's own folders is touched."""
    merged = (inspected.get("GraphDriver", {}).get("Data") or {}).get("MergedDir")
    if not merged or not workdir.startswith("/") or not os.path.isdir(merged):
        return  # a remote engine or another storage driver: left as the engine made it
    path = PurePosixPath(workdir)
    while path != path.parent:
        host = os.path.join(merged, str(path).lstrip("/"))
        try:
            if os.lstat(host).st_uid != KEEPER_UID:
                return
            os.lchown(host, 0, 0)
        except OSError:
            return
        path = path.parent


class ContainerSandbox(Sandbox):
    """A live container. Start with `start()`, or `attach()` to one another process started."""

    def __init__(self, ref: SandboxRef, *, owner: bool, tie: Any = None) -> None:
        self.ref = ref
        self._owner = owner
        self._tie = tie  # the attach socket whose closing ends the container
        self._shells: list[PersistentShell] = []
        self._control: ControlChannel | None = None
        self._closed = False

    @property
    def container_id(self) -> str:
        return str(self.ref.handle["container_id"])

    @property
    def backend(self) -> Backend:
        return self.ref.backend

    @property
    def _api(self) -> Any:
        return client(self.ref.backend).api

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    async def start(
        cls,
        image: str,
        *,
        backend: Backend | None = None,
        limits: SandboxLimits | None = None,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        network: bool = False,
        tie_to_owner: bool = True,
        labels: dict[str, str] | None = None,
        binds: list[tuple[Path, str]] | None = None,
    ) -> ContainerSandbox:
        """Start a container of `image` with the hardened profile and no network (`network`:
        slirp4netns without the host's loopback, for a task granted the internet; netns.py).

        `tie_to_owner` (default): the container is removed when this process exits, however it
        exits. Without it, the container lives until `close()` or `cleanup_stale()`.
        `binds`: (host folder, container path) pairs mounted read-write; nothing else of the
        host is visible.
        """
        backend = backend or get_settings().engine
        if network:  # only a task the gate granted the internet (netns.py: no host loopback)
            check_network(backend)
        for host, _inside in binds or []:
            if not Path(host).is_dir():
                raise SandboxError(f"bind: {host} is not a folder on the host")
        limits = profile.clamp(limits or SandboxLimits())
        # runc: the engine's default service; runsc: one started with its flags (runtimes.py).
        runtime = await call(runtimes.for_sandbox, backend, bound=bool(binds))
        api = (await call(client, backend, runtime.service_flags(network))).api
        # The sweep asks the engine's default service (all our containers, whatever runtime).
        await call(sweep_once, backend, lambda engine: client(engine).api)
        sweep_stale_images_once(backend)  # in the background: the listing grows with the store
        try:
            config = (await call(inspect_image, api, image)).get("Config") or {}
        except Exception as exc:
            raise SandboxError(f"image {image} is not available in the engine: {exc}") from exc
        host_config = await call(profile.host_config, api, backend, limits, binds=binds)
        if network:
            host_config["NetworkMode"] = SANDBOX_NETWORK
        name = f"aes-{uuid.uuid4().hex[:12]}"

        async def create(runtime: runtimes.Runtime, api: Any) -> tuple[str, str]:
            """Create the container under `runtime`, its layer capped: (id, what caps it)."""
            limited = dict(host_config)
            if not runtime.host_processes:
                limited["PidsLimit"] = runtime.host_pids(limits.pids)
            created = await call(
                api.create_container,
                image,
                entrypoint=["/bin/sh", "-c", KEEPALIVE],
                command=[],
                # docker gives an exec the capabilities it computed for the container's user:
                # with the keeper, a root exec would have none (CapEff 0), so there the keeper
                # is root.
                user=KEEPER_USER if backend == "podman" else None,
                stdin_open=True,
                detach=not tie_to_owner,  # attached stdin + StdinOnce: closes with the owner
                environment=env or {},
                hostname="sandbox",
                name=name,
                labels={**our_labels(), **(labels or {})},
                host_config=limited,
                use_config_proxy=False,  # no proxy variables from ~/.docker/config.json
            )
            return created["Id"], await call(_confine_layer, api, created["Id"], limits.disk_mb)

        container_id, layer_cap = await create(runtime, api)
        if layer_cap.startswith("measured") and not runtime.seccomp_in_exec:
            # A measured cap counts after the fact and relies on the seccomp profile refusing
            # fallocate (host disk taken in one call); runsc applies that profile to the first
            # process only, not to execs (measured: 6 GiB reserved on the host before the cap
            # looked). So such a sandbox runs under runc, as one with a bound folder does.
            await call(remove_container, api, container_id)  # never confined: nothing mounted
            runtime = runtimes.RUNTIMES["runc"]
            api = (await call(client, backend, runtime.service_flags(network))).api
            container_id, layer_cap = await create(runtime, api)
        tie = None
        try:
            if tie_to_owner:
                tie = await call(api.attach_socket, container_id, {"stdin": 1, "stream": 1})
            await call(api.start, container_id)
            inspected = await call(api.inspect_container, container_id)
            state = inspected["State"]
        except Exception as exc:
            await call(remove_container, api, container_id)
            raise SandboxError(f"container for {image} did not start: {exc}") from exc
        finally:
            # Its overlay now holds the layer's filesystem (or it never will): no mount of ours
            # stays for an engine to cover or leave behind (layerfs.py).
            await call(layerfs.release, container_id)
        _workdir_to_root(inspected, config.get("WorkingDir") or "")
        pidns = None
        # runsc: the container's processes live in gVisor's kernel, not in our /proc.
        if state.get("Pid") and runtime.host_processes:
            try:
                pidns = os.readlink(f"/proc/{state['Pid']}/ns/pid")
            except OSError:
                pidns = None  # a remote engine: its processes are not in our /proc
        ref = SandboxRef(
            backend=backend,
            id=name,
            workdir=workdir or config.get("WorkingDir") or "/",
            env=dict(env or {}),
            user=user or config.get("User") or None,
            limits=limits,
            network=network,
            handle={
                "container_id": container_id,
                "image": image,
                "pidns": pidns,
                "docker_host": engine_url("docker") if backend == "docker" else None,
                "layer_cap": layer_cap,
                **({} if runtime.name == "runc" else {"runtime": runtime.name}),
            },
        )
        sandbox = cls(ref, owner=True, tie=tie)
        if layer_cap.startswith("measured"):
            watch(sandbox)
        return sandbox

    @classmethod
    async def attach(cls, ref: SandboxRef) -> ContainerSandbox:
        if ref.backend == "docker" and ref.handle.get("docker_host"):
            os.environ.setdefault("DOCKER_HOST", ref.handle["docker_host"])
        api = (await call(client, ref.backend)).api
        try:
            state = (await call(api.inspect_container, ref.handle["container_id"]))["State"]
        except Exception as exc:
            raise SandboxError(f"sandbox {ref.id} is not running any more: {exc}") from exc
        if not state.get("Running"):
            raise SandboxError(f"sandbox {ref.id} is not running any more")
        return cls(ref, owner=False)

    async def close(self) -> None:
        """Owner: remove the container (and every process in it). Attached: close own shells."""
        if self._closed:
            return
        if self._control is not None:
            await self._control.close(reap_inside=not self._owner)
        self._closed = True
        for shell in self._shells:
            await shell.close()
        if not self._owner:
            return
        await call(remove_container, self._api, self.container_id)
        if self._tie is not None:
            try:
                self._tie.close()
            except OSError:
                pass

    # -- commands ------------------------------------------------------------------------------
    async def open_control(self) -> bool:
        """Serve later root `exec` calls through one long-lived bash (`control.py`); False when
        this container cannot have one (every call then takes the API exec)."""
        if self._control is None or self._control.dead:
            self._control = await ControlChannel.open(self)
        return self._control is not None

    async def reopen_control(self) -> bool:
        """A fresh channel (after the agent's processes, the old one among them, were killed)."""
        if self._control is not None:
            await self._control.close(reap_inside=False)
            self._control = None
        return await self.open_control()

    def _user(self, user: str | int | None) -> str:
        chosen = user if user is not None else self.ref.user
        # Never the container's own user (the keeper): the image's USER, else root.
        return "0" if chosen in (None, "") else str(chosen)

    async def exec(
        self,
        command: str,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        timeout_sec: float | None = None,
        user: str | int | None = None,
    ) -> ExecOutput:
        if self._closed:
            raise SandboxError(f"sandbox {self.ref.id} is closed")
        script = f"cd {shlex.quote(cwd or self.ref.workdir)} || exit 1\n{command}"
        exec_key = uuid.uuid4().hex
        mark = f"{EXEC_MARK}={exec_key}"
        cap = self.ref.limits.output_bytes
        if self._control is not None:
            served = await self._control.exec(
                script,
                env=env or {},
                user=self._user(user),
                mark_key=exec_key,
                timeout_sec=timeout_sec,
                cap=cap,
            )
            if served is not None:
                return served
        started = time.monotonic()
        api = self._api
        try:
            created = await call(
                api.exec_create,
                self.container_id,
                ["bash", "-c", AFTER_ATTACH, "aes-exec", script],
                environment={**(env or {}), EXEC_MARK: exec_key},
                stdin=True,
                user=self._user(user),
            )
        except Exception as exc:
            raise self._exec_failed(exc) from exc
        exec_id = created["Id"]
        out, err = PendingOutput(cap), PendingOutput(cap)
        sockets: list[Any] = []
        pump = streams.in_daemon_thread(streams.pump, api, exec_id, out, err, sockets)
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(pump), timeout_sec)
        except TimeoutError:
            timed_out = True
            await self._kill_marked(mark, keep_top=False)
            await streams.finish(pump, sockets)
        except asyncio.CancelledError:
            # Cancelled: leave nothing running behind us.
            await asyncio.shield(self._kill_marked(mark, keep_top=False))
            streams.cut(sockets)
            raise
        except Exception as exc:
            raise self._exec_failed(exc) from exc
        try:
            code = None if timed_out else await call(streams.exit_code, api, exec_id)
        except Exception as exc:  # the container went away under the command
            raise self._exec_failed(exc) from exc
        (stdout, _, t1), (stderr, _, t2) = out.take(), err.take()
        return exec_output(code, stdout, stderr, started, timed_out, t1 or t2)

    def _exec_failed(self, exc: BaseException) -> SandboxError:
        """The error, or why the sandbox was stopped under it: the writable-layer cap is a
        limit its processes went over (SandboxLimitError), not the engine failing."""
        if killed := self.ref.handle.get("killed"):
            return SandboxLimitError(f"sandbox {self.ref.id}: exec failed: {killed}")
        return SandboxError(f"sandbox {self.ref.id}: exec failed: {exc}")

    async def _kill_marked(self, mark: str, *, keep_top: bool) -> None:
        """Kill the processes carrying `mark` (and their descendants) inside the container."""
        try:
            if await call(kill_tree_host, self.ref.handle.get("pidns"), mark, keep_top):
                return
            await call(
                exec_quiet,
                self._api,
                self.container_id,
                ["/bin/sh", "-c", KILL_TREE, "kill-tree", mark, "1" if keep_top else "0"],
            )
        except (docker.errors.DockerException, OSError):
            return  # the container is gone: so are its processes

    async def open_shell(
        self,
        *,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | int | None = None,
        output_cap: int = 64_000,
    ) -> PersistentShell:
        """A long-lived bash through the engine's own `exec -i` (absolute path, fixed env)."""
        argv0, cli_env = cli_argv(self.ref.backend)
        marks: dict[int, str] = {}

        async def spawn() -> asyncio.subprocess.Process:
            if self._closed:
                raise SandboxError(f"sandbox {self.ref.id} is closed")
            if killed := self.ref.handle.get("killed"):
                raise SandboxLimitError(f"sandbox {self.ref.id}: {killed}")
            mark = f"{SHELL_MARK}={uuid.uuid4().hex}"
            argv = [*argv0, "exec", "-i", "-e", mark]
            for key, value in (env or {}).items():
                argv += ["-e", f"{key}={value}"]
            if self._user(user):
                argv += ["-u", self._user(user)]
            argv += [self.container_id, "bash", "--noprofile", "--norc"]
            proc = await asyncio.create_subprocess_exec(
                *argv,
                env=cli_env,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
            marks[proc.pid] = mark
            return proc

        async def interrupt(proc: asyncio.subprocess.Process) -> None:
            if proc.pid in marks:
                await self._kill_marked(marks[proc.pid], keep_top=True)

        async def reap(proc: asyncio.subprocess.Process) -> None:
            # Killing the CLI does not stop the bash it started in the container: kill it there.
            mark = marks.pop(proc.pid, None)
            if mark and not self._closed:
                await self._kill_marked(mark, keep_top=False)

        shell = await _EngineShell.start(
            spawn,
            interrupt=interrupt,
            reap=reap,
            output_cap=output_cap,
            cwd=cwd or self.ref.workdir,
        )
        shell.sandbox = self
        self._shells.append(shell)
        return shell

    # -- files ---------------------------------------------------------------------------------
    async def upload(self, source: Path, target: str) -> None:
        await archives.upload(self, Path(source), target)

    async def download(self, source: str, target: Path) -> list[str]:
        """Copy out of the sandbox, streamed to disk and capped (`max_download_mb`); returns
        what was skipped ("path (why)": links out of the folder, files past the cap)."""
        return await archives.download(self, source, Path(target))


class _EngineShell(PersistentShell):
    """PersistentShell whose restart / close also ends the bash inside the container."""

    def __init__(self, *args: Any, reap: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reap_inside = reap

    async def _reap(self) -> None:
        if self._proc is not None:
            await self._reap_inside(self._proc)
        await super()._reap()


# -- workspaces (part of the backend contract) ---------------------------------------------------
async def start_workspace(
    *,
    backend: Backend | None = None,
    limits: SandboxLimits | None = None,
    network: bool = False,
    workdir: str = "/workspace",
    env: dict[str, str] | None = None,
    image: str | None = None,
    binds: list[tuple[Path, str]] | None = None,
) -> ContainerSandbox:
    """A bare container on the project's Debian base: the proposer's and the MCP terminal's.

    The base must already be in the engine (`make bases`); it is never built here.
    """
    backend = backend or get_settings().engine
    image = image or await call(require_base, backend)
    sandbox = await ContainerSandbox.start(
        image,
        backend=backend,
        limits=limits,
        network=network,
        env=env,
        workdir=workdir,
        binds=binds,
    )
    made = await sandbox.exec(f"mkdir -p {shlex.quote(workdir)}", cwd="/", user="root")
    if made.exit_code != 0:
        await sandbox.close()
        raise SandboxError(f"workspace: cannot create {workdir}: {made.stderr}")
    return sandbox
