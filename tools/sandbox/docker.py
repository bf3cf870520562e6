"""Sandboxes in a real Docker engine, through the `docker` SDK (no compose, no registry needed).

One sandbox is one container: `network_mode="none"` (never a bridge network), memory / pids / cpu
limits, `docker-init` as PID 1 so orphans are reaped, and a shell builtin loop reading stdin as the
main process. The owning process holds that stdin open through an attach socket (`StdinOnce`): when
the owner exits, even by SIGKILL, the engine closes stdin, the main process ends and `auto_remove`
deletes the container. `cleanup_stale()` is the backstop (engine restarted, owner on a lost host).

Everything we create carries the label `autoenvscaling=1` (base images carry
`autoenvscaling.base` instead, so images other people build FROM them never inherit ours), and
cleanup only ever touches labelled objects.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import fcntl
import functools
import hashlib
import io
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors
from pydantic import BaseModel, Field

from autoenvscaling.tools.sandbox.base import (
    BuildError,
    ExecOutput,
    Sandbox,
    SandboxError,
    SandboxLimits,
    SandboxRef,
)
from autoenvscaling.tools.sandbox.shell import PersistentShell, _Pending
from autoenvscaling.tools.settings import get_settings

LABEL = "autoenvscaling"
OWNER_LABEL = "autoenvscaling.owner"
TASK_LABEL = "autoenvscaling.task"
BASE_LABEL = "autoenvscaling.base"
IMAGE_REPO = "autoenvscaling"  # built task images: autoenvscaling/<task>:<content-hash>
BASE_REPO = "autoenvscaling/base"
# The bases the seed pool's FROM lines name; CI tags the imported Debian base as each of them.
SEED_BASE_TAGS = ("debian:bookworm-slim", "python:3.12-slim-bookworm")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
EXEC_MARK = "AUTOENVSCALING_EXEC"
SHELL_MARK = "AUTOENVSCALING_SHELL"
# Shell builtins only, so it runs in any image with /bin/sh: it ends when stdin closes.
KEEPALIVE = "while read -r _; do :; done"
# A command is done when its process exits; the engine waits up to 2 s for a background child
# holding the output open, so the stream is given a little more than that before it is cut.
STREAM_GRACE_SEC = 3.0

Log = Callable[[str], None]

# Kill every process carrying the marker `$1` in its environment, plus all their descendants (a
# child may have cleared its environment); with `$2` = 1 the marked process the engine started
# (the persistent shell: its parent is outside the container, ppid 0) is spared. Processes are
# stopped before they are killed so none can fork in between; rounds repeat until none is left.
# POSIX sh + grep -z: the fallback when the container's processes are not visible from here.
KILL_TREE = r"""
tag="$1"; keep="$2"; round=0
while [ $round -lt 20 ]; do
  round=$((round + 1))
  marked=""
  for f in $(grep -lzx -- "$tag" /proc/[0-9]*/environ 2>/dev/null); do
    p=${f#/proc/}; marked="$marked ${p%/environ}"
  done
  pairs=""
  for d in /proc/[0-9]*; do
    { read -r st < "$d/stat"; } 2>/dev/null || continue
    set -- ${st##*) }
    [ "$1" = Z ] && continue
    pairs="$pairs ${d#/proc/}:$2"
  done
  top=""
  if [ "$keep" = 1 ]; then
    for p in $marked; do
      for pr in $pairs; do [ "$pr" = "$p:0" ] && top=$p; done
    done
  fi
  set_=" $marked $top "
  changed=1
  while [ $changed = 1 ]; do
    changed=0
    for pr in $pairs; do
      c=${pr%%:*}
      case "$set_" in *" $c "*) continue ;; esac
      case "$set_" in *" ${pr#*:} "*) set_="$set_$c "; changed=1 ;; esac
    done
  done
  targets=""
  for p in $set_; do
    alive=0
    for pr in $pairs; do [ "${pr%%:*}" = "$p" ] && alive=1; done
    [ $alive = 1 ] && [ "$p" != "$top" ] && [ "$p" != "$$" ] && [ "$p" != 1 ] && targets="$targets $p"
  done
  [ -z "$targets" ] && exit 0
  kill -STOP $targets 2>/dev/null
  kill -KILL $targets 2>/dev/null
done
"""


class DockerUnavailableError(SandboxError):
    """No Docker engine answers (or the SDK cannot reach it)."""


class DockerImage(BaseModel):
    """An image a sandbox can start from."""

    tag: str
    id: str
    built: bool = Field(False, description="True when this call built it (not from the cache).")
    notes: list[str] = Field(default_factory=list)


# -- engine access ------------------------------------------------------------------------------
# SDK calls block; they run on this pool so a command that runs for minutes never starves
# asyncio's default executor.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="aes-docker")
_CLIENTS: dict[str | None, Any] = {}
_CLIENTS_LOCK = threading.Lock()


def client(docker_host: str | None = None) -> Any:
    """A cached `docker.DockerClient` for `docker_host` (default: DOCKER_HOST / the local socket)."""
    key = docker_host or os.environ.get("DOCKER_HOST")
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            try:
                made = (
                    docker.DockerClient(base_url=key, max_pool_size=32)
                    if key
                    else docker.from_env(max_pool_size=32)
                )
                made.ping()
            except Exception as exc:
                raise DockerUnavailableError(
                    f"no Docker engine answers at {key or 'the default socket'}: {exc}. Start "
                    "dockerd (see .ci/docker-tier) or set DOCKER_HOST."
                ) from exc
            _CLIENTS[key] = made
        return _CLIENTS[key]


async def _call[T](fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_POOL, functools.partial(fn, *args, **kwargs))


def _in_daemon_thread[T](fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
    """Run a blocking call that may last as long as a command does.

    A daemon thread, not the pool: the pool's threads are joined at interpreter exit, and a
    stream still open then would keep the process from ever exiting.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def target() -> None:
        try:
            result, error = fn(*args), None
        except BaseException as exc:  # noqa: BLE001 - re-raised in the awaiting coroutine
            result, error = None, exc
        try:
            loop.call_soon_threadsafe(settle, result, error)
        except RuntimeError:
            pass  # the loop is closed: nobody is waiting any more

    threading.Thread(target=target, name="aes-docker-stream", daemon=True).start()
    return future


def _owner() -> str:
    """This process, as `boot-id:pid:start-time`, so a later cleanup can tell if it still lives."""
    return f"{_boot_id()}:{os.getpid()}:{_start_time(os.getpid())}"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return socket.gethostname()


def _start_time(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return "?"


def _owner_alive(owner: str) -> bool | None:
    """True / False for an owner on this machine's current boot; None when we cannot tell."""
    try:
        boot, pid, started = owner.rsplit(":", 2)
    except ValueError:
        return None
    if boot != _boot_id():
        return None
    return _start_time(int(pid)) == started


# -- the sandbox --------------------------------------------------------------------------------
class DockerSandbox(Sandbox):
    """A live container. Start with `start()`, or `attach()` to one another process started."""

    def __init__(self, ref: SandboxRef, *, owner: bool, tie: Any = None) -> None:
        self.ref = ref
        self._owner = owner
        self._tie = tie  # the attach socket whose closing ends the container
        self._shells: list[PersistentShell] = []
        self._closed = False

    @property
    def container_id(self) -> str:
        return str(self.ref.handle["container_id"])

    @property
    def _api(self) -> Any:
        return client(self.ref.handle.get("docker_host")).api

    # -- lifecycle ---------------------------------------------------------------------------
    @classmethod
    async def start(
        cls,
        image: str,
        *,
        limits: SandboxLimits | None = None,
        env: dict[str, str] | None = None,
        workdir: str | None = None,
        user: str | None = None,
        network: bool = False,
        tie_to_owner: bool = True,
        labels: dict[str, str] | None = None,
    ) -> DockerSandbox:
        """Start a container of `image` with no network.

        `tie_to_owner` (default): the container is removed when this process exits, however it
        exits. Without it, the container lives until `close()` or `cleanup_stale()`.
        """
        if network:
            raise SandboxError(
                "docker sandboxes never join a network (bridge addresses are off-limits here); "
                "install packages in the image build, which may use the host network"
            )
        limits = limits or SandboxLimits()
        docker_host = os.environ.get("DOCKER_HOST")
        api = (await _call(client, docker_host)).api
        try:
            config = (await _call(api.inspect_image, image)).get("Config") or {}
        except Exception as exc:
            raise SandboxError(f"image {image} is not available in the engine: {exc}") from exc
        mem = f"{limits.memory_mb}m" if limits.memory_mb else None
        host_config = api.create_host_config(
            network_mode="none",
            init=True,
            auto_remove=True,
            mem_limit=mem,
            memswap_limit=mem,  # no swap: the limit is the limit
            pids_limit=limits.pids,
            nano_cpus=int(limits.cpus * 1e9) if limits.cpus else None,
        )
        name = f"aes-{uuid.uuid4().hex[:12]}"
        created = await _call(
            api.create_container,
            image,
            entrypoint=["/bin/sh", "-c", KEEPALIVE],
            stdin_open=True,
            detach=not tie_to_owner,  # attached stdin + StdinOnce: closes with the owner
            environment=env or {},
            hostname="sandbox",
            name=name,
            labels={LABEL: "1", OWNER_LABEL: _owner(), **(labels or {})},
            host_config=host_config,
            use_config_proxy=False,  # no proxy variables from ~/.docker/config.json
        )
        container_id = created["Id"]
        tie = None
        try:
            if tie_to_owner:
                tie = await _call(api.attach_socket, container_id, {"stdin": 1, "stream": 1})
            await _call(api.start, container_id)
        except Exception as exc:
            await _call(_remove_container, api, container_id)
            raise SandboxError(f"container for {image} did not start: {exc}") from exc
        ref = SandboxRef(
            backend="docker",
            id=name,
            workdir=workdir or config.get("WorkingDir") or "/",
            env=dict(env or {}),
            user=user or config.get("User") or None,
            limits=limits,
            network=False,
            handle={"container_id": container_id, "docker_host": docker_host, "image": image},
        )
        return cls(ref, owner=True, tie=tie)

    @classmethod
    async def attach(cls, ref: SandboxRef) -> DockerSandbox:
        api = (await _call(client, ref.handle.get("docker_host"))).api
        try:
            state = (await _call(api.inspect_container, ref.handle["container_id"]))["State"]
        except Exception as exc:
            raise SandboxError(f"sandbox {ref.id} is not running any more: {exc}") from exc
        if not state.get("Running"):
            raise SandboxError(f"sandbox {ref.id} is not running any more")
        return cls(ref, owner=False)

    async def close(self) -> None:
        """Owner: remove the container (and every process in it). Attached: close own shells."""
        if self._closed:
            return
        self._closed = True
        for shell in self._shells:
            await shell.close()
        if not self._owner:
            return
        await _call(_remove_container, self._api, self.container_id)
        if self._tie is not None:
            try:
                self._tie.close()
            except OSError:
                pass

    # -- commands ------------------------------------------------------------------------------
    def _user(self, user: str | int | None) -> str:
        chosen = user if user is not None else self.ref.user
        return "" if chosen in (None, "") else str(chosen)

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
        started = time.monotonic()
        api = self._api
        try:
            created = await _call(
                api.exec_create,
                self.container_id,
                ["bash", "-c", script],
                environment={**(env or {}), EXEC_MARK: exec_key},
                user=self._user(user),
            )
        except Exception as exc:
            raise SandboxError(f"sandbox {self.ref.id}: exec failed: {exc}") from exc
        exec_id = created["Id"]
        cap = self.ref.limits.output_bytes
        out, err = _Pending(cap), _Pending(cap)
        sockets: list[Any] = []
        pump = _in_daemon_thread(_pump, api, exec_id, out, err, sockets)
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(pump), timeout_sec)
        except TimeoutError:
            timed_out = True
            await self._kill_marked(mark, keep_top=False)
            await _finish(pump, sockets)
        except asyncio.CancelledError:
            # Cancelled: leave nothing running behind us.
            await asyncio.shield(self._kill_marked(mark, keep_top=False))
            _cut(sockets)
            raise
        except Exception as exc:
            raise SandboxError(f"sandbox {self.ref.id}: exec failed: {exc}") from exc
        code = None if timed_out else await _call(_exit_code, api, exec_id)
        (stdout, _, t1), (stderr, _, t2) = out.take(), err.take()
        return ExecOutput(
            exit_code=code,
            stdout=stdout,
            stderr=stderr,
            duration_sec=time.monotonic() - started,
            timed_out=timed_out,
            truncated=t1 or t2,
        )

    async def _kill_marked(self, mark: str, *, keep_top: bool) -> None:
        """Kill the processes carrying `mark` (and their descendants) inside the container.

        From the host's /proc when the engine runs on this machine (works even when the pids
        limit leaves no room for one more process); else with a script exec'd in the container.
        """
        try:
            if await _call(_kill_tree_host, self.container_id, mark, keep_top):
                return
            await _call(
                _exec_quiet,
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
        """A long-lived bash through `docker exec -i` (needs the docker CLI on PATH)."""
        cli = shutil.which("docker")
        if cli is None:
            raise SandboxError(
                "the persistent shell on docker needs the docker CLI on PATH "
                "(apt-get install docker.io, or docker-ce-cli)"
            )
        marks: dict[int, str] = {}
        cli_env = dict(os.environ)
        if self.ref.handle.get("docker_host"):
            cli_env["DOCKER_HOST"] = self.ref.handle["docker_host"]

        async def spawn() -> asyncio.subprocess.Process:
            if self._closed:
                raise SandboxError(f"sandbox {self.ref.id} is closed")
            mark = f"{SHELL_MARK}={uuid.uuid4().hex}"
            argv = [cli, "exec", "-i", "-e", mark]
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

        shell = await _DockerShell.start(
            spawn,
            interrupt=interrupt,
            reap=reap,
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
                    tar.add(child, arcname=child.name, filter=_as_root)
            else:
                dest = os.path.dirname(target.rstrip("/")) or "/"
                tar.add(source, arcname=os.path.basename(target.rstrip("/")), filter=_as_root)
        data = buffer.getvalue()

        try:
            await _call(self._api.put_archive, self.container_id, dest, data)
            return
        except docker.errors.NotFound:
            pass  # the destination folder does not exist yet
        except Exception as exc:
            raise SandboxError(f"upload to {target} failed: {exc}") from exc
        made = await self.exec(f"mkdir -p {shlex.quote(dest)}", cwd="/", user="root")
        if made.exit_code != 0:
            raise SandboxError(f"upload to {target} failed: {(made.stderr or made.stdout)[-500:]}")
        try:
            await _call(self._api.put_archive, self.container_id, dest, data)
        except Exception as exc:
            raise SandboxError(f"upload to {target} failed: {exc}") from exc

    async def download(self, source: str, target: Path) -> None:
        target = Path(target)
        path = source.rstrip("/") or "/"
        with tempfile.TemporaryDirectory() as tmp:
            try:
                name, is_dir = await _call(_fetch_archive, self._api, self.container_id, path, tmp)
            except Exception as exc:
                raise SandboxError(f"download of {source} failed: {exc}") from exc
            extracted = Path(tmp) / "x" / name
            if is_dir:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copytree(extracted, target, dirs_exist_ok=True, symlinks=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(extracted, target)


class _DockerShell(PersistentShell):
    """PersistentShell whose restart / close also ends the bash inside the container."""

    def __init__(self, *args: Any, reap: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reap_inside = reap

    async def _reap(self) -> None:
        if self._proc is not None:
            await self._reap_inside(self._proc)
        await super()._reap()


# -- blocking helpers (run on _POOL) -------------------------------------------------------------
def _pump(api: Any, exec_id: str, out: _Pending, err: _Pending, sockets: list[Any]) -> None:
    from docker.utils.socket import STDOUT, frames_iter

    sock = api.exec_start(exec_id, socket=True)
    api._disable_socket_timeout(sock)  # a quiet command may print nothing for minutes
    sockets.append(sock)
    try:
        for stream, data in frames_iter(sock, False):
            (out if stream == STDOUT else err).add(data)
    except OSError:
        pass  # cut by _cut() after a timeout
    finally:
        try:
            sock.close()
        except OSError:
            pass


def _cut(sockets: list[Any]) -> None:
    for sock in sockets:
        try:
            getattr(sock, "_sock", sock).shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


async def _finish(pump: asyncio.Future[None], sockets: list[Any]) -> None:
    """Give the output stream a moment to end on its own, then cut it."""
    try:
        await asyncio.wait_for(asyncio.shield(pump), STREAM_GRACE_SEC)
    except TimeoutError:
        _cut(sockets)
        await pump


def _exit_code(api: Any, exec_id: str) -> int | None:
    for _ in range(100):  # the stream may close a moment before the engine records the exit
        info = api.exec_inspect(exec_id)
        if not info.get("Running"):
            return info.get("ExitCode")
        time.sleep(0.02)
    return None


def _container_pids(container_id: str) -> list[int] | None:
    """Host pids of the container's processes, or None when they are not visible from here."""
    found, visible = [], False
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            groups = (entry / "cgroup").read_text()
        except OSError:
            continue
        visible = True
        if container_id in groups:
            found.append(int(entry.name))
    return found if visible and found else None


def _proc_facts(pid: int) -> tuple[int, str, bytes] | None:
    """(ppid, state, environ) of a host process, or None if it is gone or unreadable."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(stat[1]), stat[0], Path(f"/proc/{pid}/environ").read_bytes()
    except (OSError, IndexError, ValueError):
        return None


def _kill_tree_host(container_id: str, mark: str, keep_top: bool) -> bool:
    """The host-side twin of KILL_TREE. False when the container's processes are not visible."""
    needle = mark.encode()
    for _ in range(20):
        pids = _container_pids(container_id)
        if pids is None:
            return False
        facts = {pid: f for pid in pids if (f := _proc_facts(pid)) and f[1] != "Z"}
        marked = {pid for pid, f in facts.items() if needle in f[2].split(b"\0")}
        # The shell was started by the engine (its parent is outside the container); orphans
        # of earlier commands were adopted by docker-init and are fair game.
        top = {pid for pid in marked if facts[pid][0] not in pids} if keep_top else set()
        targets = set(marked)
        grew = True
        while grew:
            grew = False
            for pid, f in facts.items():
                if pid not in targets and f[0] in targets:
                    targets.add(pid)
                    grew = True
        targets -= top
        if not targets:
            return True
        for sig in (signal.SIGSTOP, signal.SIGKILL):
            for pid in targets:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
    return True


def _exec_quiet(api: Any, container_id: str, argv: list[str]) -> bytes:
    created = api.exec_create(container_id, argv, user="root")
    return api.exec_start(created["Id"])


def _remove_container(api: Any, container_id: str) -> None:

    try:
        api.remove_container(container_id, force=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as exc:
        if "already in progress" not in str(exc):
            raise SandboxError(f"could not remove container {container_id[:12]}: {exc}") from exc


def _as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _fetch_archive(api: Any, container_id: str, path: str, tmp: str) -> tuple[str, bool]:
    chunks, stat = api.get_archive(container_id, path)
    archive = Path(tmp) / "archive.tar"
    with open(archive, "wb") as handle:
        handle.writelines(chunks)
    with tarfile.open(archive) as tar:
        tar.extractall(Path(tmp) / "x", filter="data")  # refuses links and paths that leave tmp
    is_dir = bool(stat.get("mode", 0) & (1 << 31))  # Go's os.ModeDir
    return stat["name"], is_dir


# -- images --------------------------------------------------------------------------------------
def _repo_name(task_name: str) -> str:
    name = re.sub(r"[^a-z0-9._-]", "-", task_name.lower()).strip(".-_") or "task"
    return f"{IMAGE_REPO}/{name[:100]}"


def _parent_images(dockerfile: Path) -> list[str]:
    from dockerfile_parse import DockerfileParser

    parser = DockerfileParser(str(dockerfile))
    stages = {
        line["value"].split()[-1].lower()
        for line in parser.structure
        if line["instruction"] == "FROM" and " as " in line["value"].lower()
    }
    return [p for p in parser.parent_images if p.lower() not in stages and p != "scratch"]


def image_tag(task_name: str, environment_dir: Path, api: Any | None = None) -> str:
    """`autoenvscaling/<task>:<hash>` of the environment's files and of the FROM images' ids."""
    from harbor.environments.definition import environment_content_hash

    digest = hashlib.sha256(environment_content_hash(environment_dir, truncate=64).encode())
    dockerfile = environment_dir / "Dockerfile"
    if dockerfile.exists():
        api = api or client().api
        for parent in _parent_images(dockerfile):
            try:
                digest.update(api.inspect_image(parent)["Id"].encode())
            except docker.errors.ImageNotFound:
                digest.update(parent.encode())
    return f"{_repo_name(task_name)}:{digest.hexdigest()[:16]}"


def _build_blocking(
    environment_dir: Path, tag: str, task_name: str, force: bool, timeout_sec: float, say: Log
) -> DockerImage:
    api = client().api
    dockerfile = environment_dir / "Dockerfile"
    missing = []
    for parent in _parent_images(dockerfile):
        try:
            api.inspect_image(parent)
        except docker.errors.ImageNotFound:
            missing.append(parent)
    try:
        previous = api.inspect_image(tag)["Id"]
    except docker.errors.ImageNotFound:
        previous = None
    deadline = time.monotonic() + timeout_sec
    log: list[str] = []
    error = None
    try:
        for chunk in api.build(
            path=str(environment_dir),
            tag=tag,
            rm=True,
            forcerm=True,
            nocache=force,
            network_mode="host",  # builds may fetch packages; containers never get a network
            labels={LABEL: "1", TASK_LABEL: task_name},
            decode=True,
            timeout=max(int(timeout_sec), 1),
        ):
            if text := chunk.get("stream"):
                log.append(text)
                if text.strip():
                    say(text.rstrip())
            if chunk.get("error"):
                error = chunk["error"]
            if time.monotonic() > deadline:
                error = f"build timed out after {timeout_sec:.0f} s"
                break
    except (docker.errors.DockerException, OSError) as exc:
        error = (
            f"build timed out after {timeout_sec:.0f} s"
            if "timed out" in str(exc).lower()
            else f"{type(exc).__name__}: {exc}"
        )
    if error:
        tail = "".join(log)[-1500:]
        hint = ""
        if missing:
            hint = (
                f"\nFROM {', '.join(missing)}: not in the engine and no registry answered. Import "
                "the project's Debian base under that name: python -m "
                f"autoenvscaling.tools.sandbox.docker bases {' '.join(missing)}"
            )
        raise BuildError(f"docker build of {environment_dir} failed: {error}\n{tail}{hint}")
    image_id = api.inspect_image(tag)["Id"]
    if previous and previous != image_id:
        try:  # a forced rebuild leaves the old image nameless: drop it unless a container uses it
            api.remove_image(previous, force=False, noprune=False)
        except docker.errors.APIError:
            pass
    return DockerImage(tag=tag, id=image_id, built=True)


async def build_image(
    environment_dir: Path,
    *,
    task_name: str | None = None,
    docker_image: str | None = None,
    force: bool = False,
    timeout_sec: float = 600,
    log: Log | None = None,
) -> DockerImage:
    """Build `environment/Dockerfile` (cached by content hash), or use `docker_image` as is."""
    say = log or (lambda _msg: None)
    environment_dir = Path(environment_dir).resolve()
    task_name = task_name or environment_dir.parent.name
    api = (await _call(client)).api
    if not (environment_dir / "Dockerfile").exists():
        if not docker_image:
            raise BuildError(f"{environment_dir}: no Dockerfile and no docker_image")
        try:
            found = await _call(api.inspect_image, docker_image)
        except docker.errors.ImageNotFound:
            try:
                say(f"pulling {docker_image}")
                await _call(api.pull, docker_image)
                found = await _call(api.inspect_image, docker_image)
            except Exception as exc:
                raise BuildError(
                    f"docker_image {docker_image}: not in the engine and could not be pulled: {exc}"
                ) from exc
        return DockerImage(tag=docker_image, id=found["Id"])
    tag = await _call(image_tag, task_name, environment_dir, api)
    return await _call(_build_locked, environment_dir, tag, task_name, force, timeout_sec, say)


def _build_locked(
    environment_dir: Path, tag: str, task_name: str, force: bool, timeout_sec: float, say: Log
) -> DockerImage:
    api = client().api
    if not force:
        try:
            return DockerImage(tag=tag, id=api.inspect_image(tag)["Id"])
        except docker.errors.ImageNotFound:
            pass
    with _lock(f"build-{tag.replace('/', '_').replace(':', '_')}"):  # same task built in parallel
        if not force:
            try:
                return DockerImage(tag=tag, id=api.inspect_image(tag)["Id"])
            except docker.errors.ImageNotFound:
                pass
        return _build_blocking(environment_dir, tag, task_name, force, timeout_sec, say)


class _lock:
    """An exclusive file lock in the cache folder (held across processes)."""

    def __init__(self, name: str) -> None:
        folder = get_settings().cache_dir / "docker"
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{name}.lock"

    def __enter__(self) -> None:
        self.handle = open(self.path, "w")
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def base_image_tag() -> str:
    """The tag of the project's Debian base image (the bwrap base rootfs, imported)."""
    from autoenvscaling.tools.sandbox.rootfs import base_rootfs_path

    return f"{BASE_REPO}:{base_rootfs_path().name}"


def ensure_base_image(
    tags: Sequence[str] = (), *, replace: bool = False, log: Log | None = None
) -> list[str]:
    """Import the bwrap base rootfs as `autoenvscaling/base:<name>` (once) and tag it as `tags`.

    No registry is needed: the rootfs is debootstrapped once per machine and its tarball cached.
    A tag that already names an image we did not import is left alone unless `replace`.
    Returns the tags that now name the base.
    """
    from autoenvscaling.tools.sandbox.rootfs import ensure_base_rootfs

    say = log or (lambda _msg: None)
    api = client().api
    rootfs = ensure_base_rootfs()
    base = f"{BASE_REPO}:{rootfs.name}"
    with _lock("base-import"):
        try:
            base_id = api.inspect_image(base)["Id"]
        except docker.errors.ImageNotFound:
            tarball = _base_tarball(rootfs, say)
            say(f"importing {tarball.name} as {base}")
            api.import_image_from_file(
                str(tarball),
                repository=BASE_REPO,
                tag=rootfs.name,
                changes=[
                    f"ENV PATH={DEFAULT_PATH}",
                    "ENV LANG=C.UTF-8",
                    f"LABEL {BASE_LABEL}={rootfs.name}",
                    'CMD ["bash"]',
                ],
            )
            base_id = api.inspect_image(base)["Id"]
        done = [base]
        for tag in tags:
            repo, _, name = (
                tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
            )
            try:
                current = api.inspect_image(tag)
                ours = current["Id"] == base_id
                if not ours and not replace:
                    say(f"{tag} already names another image; left alone")
                    continue
            except docker.errors.ImageNotFound:
                pass
            api.tag(base_id, repo, name, force=True)
            done.append(tag)
    return done


def _base_tarball(rootfs: Path, say: Log) -> Path:
    """`tar` of the rootfs, cached next to the other docker artefacts (numeric owners)."""
    folder = get_settings().cache_dir / "docker"
    folder.mkdir(parents=True, exist_ok=True)
    tarball = folder / f"{rootfs.name}.tar"
    if tarball.exists():
        return tarball
    say(f"packing {rootfs} into {tarball}")
    tmp = tarball.with_suffix(f".tmp-{uuid.uuid4().hex[:6]}")
    done = subprocess.run(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(tmp), "."],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise SandboxError(f"could not pack the base rootfs: {done.stderr[-1000:]}")
    tmp.rename(tarball)
    return tarball


# -- cleanup -------------------------------------------------------------------------------------
class CleanupReport(BaseModel):
    containers: list[str] = Field(default_factory=list, description="Removed container names.")
    images: list[str] = Field(default_factory=list, description="Removed image tags or ids.")
    kept: list[str] = Field(default_factory=list, description="Skipped, with the reason.")


def cleanup_stale(*, docker_host: str | None = None) -> CleanupReport:
    """Remove our containers that no process can use any more.

    A labelled container is stale when it has exited, or when its owner (recorded at start) was
    a process on this machine that has exited. Containers of live owners, and of owners on other
    machines, are left alone while they run; unlabelled containers are never looked at.
    """
    api = client(docker_host).api
    report = CleanupReport()
    for info in api.containers(all=True, filters={"label": f"{LABEL}=1"}):
        name = (info.get("Names") or [info["Id"][:12]])[0].lstrip("/")
        owner = (info.get("Labels") or {}).get(OWNER_LABEL, "")
        ended = info.get("State") in ("exited", "dead")
        # A live (or unknown) owner's container may be just starting: only an ended one goes.
        if not ended and _owner_alive(owner) is not False:
            continue
        _remove_container(api, info["Id"])
        report.containers.append(name)
    return report


def _ours(image: dict[str, Any]) -> bool:
    tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
    return all(t.startswith(f"{IMAGE_REPO}/") and not t.startswith(BASE_REPO) for t in tags)


def gc_images(keep: Iterable[str], *, docker_host: str | None = None) -> CleanupReport:
    """Remove the task images we built, except those named in `keep` (tags or image ids).

    Only images labelled `autoenvscaling=1` whose every tag is `autoenvscaling/...` (or that
    have no tag left) are candidates; images in use by a container are skipped and reported.
    """

    api = client(docker_host).api
    keep = set(keep)
    report = CleanupReport()
    for image in api.images(filters={"label": f"{LABEL}=1"}):
        if not _ours(image):
            continue
        tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
        if keep & {image["Id"], *tags}:
            continue
        try:
            for tag in tags or [image["Id"]]:
                api.remove_image(tag, force=False, noprune=False)
            report.images.extend(tags or [image["Id"]])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            report.kept.append(f"{tags or image['Id']}: {exc.explanation or exc}")
    return report


def remove_task_image(task_dir: Path, *, docker_host: str | None = None) -> bool:
    """Remove the image built for one task folder (a rejected candidate). False if none."""

    api = client(docker_host).api
    task_dir = Path(task_dir).resolve()
    tag = image_tag(task_dir.name, task_dir / "environment", api)
    try:
        api.remove_image(tag, force=False, noprune=False)
    except docker.errors.NotFound:
        return False
    return True


def pool_image_tags(task_dirs: Iterable[Path]) -> set[str]:
    """The tags the images of these task folders have (what `gc_images` should keep)."""
    api = client().api
    return {
        image_tag(Path(d).resolve().name, Path(d).resolve() / "environment", api)
        for d in task_dirs
        if (Path(d) / "environment" / "Dockerfile").exists()
    }


# -- the proposer's workspace --------------------------------------------------------------------
async def start_workspace(
    *,
    limits: SandboxLimits | None = None,
    network: bool = False,
    workdir: str = "/workspace",
    env: dict[str, str] | None = None,
    image: str | None = None,
) -> DockerSandbox:
    """A bare container on the project's Debian base (imported on first use, ~1 min)."""
    image = image or (await asyncio.to_thread(ensure_base_image))[0]
    sandbox = await DockerSandbox.start(
        image, limits=limits, network=network, env=env, workdir=workdir
    )
    made = await sandbox.exec(f"mkdir -p {shlex.quote(workdir)}", cwd="/", user="root")
    if made.exit_code != 0:
        await sandbox.close()
        raise SandboxError(f"workspace: cannot create {workdir}: {made.stderr}")
    return sandbox


def main(argv: list[str] | None = None) -> int:
    """`python -m autoenvscaling.tools.sandbox.docker bases [TAG...] | cleanup`"""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in ("bases", "cleanup"):
        print(main.__doc__)
        return 2
    if args[0] == "bases":
        tags = ensure_base_image(args[1:] or SEED_BASE_TAGS, log=print)
        print("base image:", ", ".join(tags))
    else:
        print(cleanup_stale().model_dump_json(indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
