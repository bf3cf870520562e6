"""The container engine a sandbox runs on: podman (default, started by us) or a docker daemon.

Both are driven through the `docker` SDK. For podman, each process that needs it starts its own
`podman system service` on a private socket with our own `containers.conf` (CONTAINERS_CONF;
nothing global changed), and stops it at exit; the service gets SIGTERM if this process dies
(PR_SET_PDEATHSIG). Containers and images live in podman's shared storage, so a sandbox started by
one process is reachable from another process's service. For docker, the daemon at DOCKER_HOST
(or the default socket) must already answer.

Every program started here is called by absolute path with a fixed environment.

A watchdog bounds every API call: one that does not answer within `ENGINE_CALL_SEC` (the SDK's
read timeout) raises `EngineWedgedError`, an infrastructure failure whose message is the state of
the engine's storage (engine_health.py: locks held, layers left incomplete, hidden mounts) and
the commands that bring it back. A wedged engine never turns into a silent wait.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import ctypes
import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests.exceptions

from autoenvscaling.tools.sandbox.base import Backend, SandboxError
from autoenvscaling.tools.settings import get_settings

PODMAN = "/usr/bin/podman"
FIXED_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A loaded machine (many trials starting at once) has taken ~30 s to answer: be generous.
SERVICE_START_SEC = 120.0
#: The watchdog's bound on one answer of the engine's API. podman answers in milliseconds; its
#: slowest answers seen here (a loaded 2-core machine) took ~30 s.
ENGINE_CALL_SEC = 60.0
PR_SET_PDEATHSIG = 1

# podman's defaults exceed this kind of host's hard limits (setrlimit fails) and crun refuses a
# hybrid cgroup v1+v2 layout: runc with ulimits that fit. `init_path`: catatonit, for `--init`.
CONTAINERS_CONF = """\
# Written by autoenvscaling; used only through CONTAINERS_CONF by processes it starts.
[containers]
default_ulimits = ["nofile=4096:4096", "nproc=4096:4096"]
init_path = "/usr/bin/catatonit"

[engine]
runtime = "runc"
# Each API exec leaves a conmon waiting this long (default 300 s, Docker's behaviour) so a client
# can still inspect the session; we inspect at once, and thousands of execs a run otherwise leave
# thousands of conmon processes behind.
exit_command_delay = 10
"""


class EngineUnavailableError(SandboxError):
    """The engine cannot be started or reached. The message says why and what to install."""


class EngineWedgedError(EngineUnavailableError):
    """The engine did not answer within its bound: an infrastructure failure, with the state of
    its storage and the commands that recover it in the message."""


def wedged_error(what: str, backend: Backend = "podman") -> EngineWedgedError:
    """`what` did not answer: the error, with what the engine's storage shows now."""
    if backend != "podman":
        return EngineWedgedError(f"{what} (the {backend} engine did not answer)")
    from autoenvscaling.tools.sandbox import engine_health

    try:
        health = engine_health.read()
    except OSError as exc:
        return EngineWedgedError(f"{what}; the engine's state could not be read: {exc}")
    steps = health.recovery()
    return EngineWedgedError(
        f"{what}; engine state: {health.describe()}"
        + (
            f"; to recover (as root): {' && '.join(s.split('  #')[0] for s in steps)}"
            if steps
            else ""
        )
        + "; `autoenvscaling doctor` shows it"
    )


def cli_answers(bound: float) -> float | None:
    """Seconds a plain `podman ps -a` took, or None when it did not answer within `bound` (a
    fresh podman process: it takes the storage locks a wedge holds)."""
    started = time.monotonic()
    try:
        subprocess.run(
            [PODMAN, "ps", "-a", "--format", "{{.ID}}"],
            env=podman_env(),
            capture_output=True,
            timeout=bound,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None
    return time.monotonic() - started


def wedge_now(bound: float = 15.0) -> EngineWedgedError | None:
    """The error when podman is wedged now (a fresh process gets no answer within `bound`, or
    its storage has a layer left incomplete or a hidden mount); None when it is healthy. For a
    CLI call of ours that ran past its own deadline: the engine's fault, or the work's."""
    if cli_answers(bound) is None:
        return wedged_error(f"`podman ps -a` did not answer within {bound:g} s")
    from autoenvscaling.tools.sandbox import engine_health

    if faults := engine_health.read().faults:
        return wedged_error(f"podman's storage is damaged: {'; '.join(faults)}")
    return None


def is_timeout(exc: BaseException) -> bool:
    """The engine did not answer in time (whatever layer of the SDK noticed it)."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, requests.exceptions.Timeout | TimeoutError):
            return True
        if "read timed out" in str(seen).lower():
            return True
        seen = seen.__cause__ or seen.__context__
    return False


# SDK calls block; they run on this pool so a command that runs for minutes never starves
# asyncio's default executor.
_POOL = concurrent.futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="aes-engine")


async def call[T](fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run a blocking engine call off the event loop; no answer in time is `EngineWedgedError`."""
    loop = asyncio.get_running_loop()
    try:
        return await loop.run_in_executor(_POOL, functools.partial(fn, *args, **kwargs))
    except EngineWedgedError:
        raise
    except Exception as exc:
        if is_timeout(exc):
            name = getattr(fn, "__name__", "an engine call")
            raise wedged_error(
                f"the engine did not answer {name} within {ENGINE_CALL_SEC:g} s: {exc}"
            ) from exc
        raise


def inspect_image(api: Any, name: str) -> dict[str, Any]:
    """`api.inspect_image`, asked again when the engine answers 500 for a moment.

    podman's image lookup fails with "failed to convert ImageData to ImageInspect" (a 500 whose
    text ends "image not known", naming the *other* image) while another image is being removed:
    two candidates with identical environments share one image, or a gc or a parallel run
    removes one. A second look a moment later answers. A missing image (404) is not retried.
    """
    for attempt in range(5):
        try:
            return api.inspect_image(name)
        except docker.errors.APIError as exc:
            missing = "no such image" in str(exc).lower()
            if attempt == 4 or missing or exc.status_code is None or exc.status_code < 500:
                raise
            time.sleep(0.2 * 2**attempt)
    raise AssertionError("unreachable")


def config_dir() -> Path:
    """Our engine configuration (containers.conf, seccomp profile), written on first use."""
    folder = get_settings().cache_dir / "engine"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def containers_conf() -> Path:
    path = config_dir() / "containers.conf"
    if not path.exists() or path.read_text() != CONTAINERS_CONF:
        tmp = path.with_suffix(f".tmp-{os.getpid()}")
        tmp.write_text(CONTAINERS_CONF)
        tmp.replace(path)
    return path


def podman_env() -> dict[str, str]:
    """The whole environment of every podman process we start (nothing inherited)."""
    return {
        "PATH": FIXED_PATH,
        "HOME": os.environ.get("HOME", "/root"),
        "CONTAINERS_CONF": str(containers_conf()),
        "TMPDIR": tempfile.gettempdir(),
        "LANG": "C.UTF-8",
    }


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded now: no dlopen between fork and exec


def _die_with_parent() -> None:
    """preexec: SIGTERM when the thread that started us dies (see `_Service`: it never exits)."""
    _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


class _Service:
    """This process's own `podman system service`, started on first use, stopped at exit.
    `flags`: podman's global flags for it (a sandbox runtime's, runtimes.py; none for runc)."""

    def __init__(self, flags: tuple[str, ...] = ()) -> None:
        self.flags = flags
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.folder: Path | None = None
        self.url: str | None = None
        self.pid = 0  # the process that started it (a fork must start its own)

    def ensure(self) -> str:
        with self.lock:
            if self.url and self.pid == os.getpid() and self.proc and self.proc.poll() is None:
                return self.url
            return self._start()

    def _start(self) -> str:
        if not os.access(PODMAN, os.X_OK):
            raise EngineUnavailableError(
                f"{PODMAN} is missing: apt-get install podman runc uidmap catatonit "
                "(`make system` does it)"
            )
        folder = Path(tempfile.mkdtemp(prefix=f"aes-podman-{os.getpid()}-"))
        sock = folder / "api.sock"
        log = open(folder / "service.log", "wb")  # noqa: SIM115 - kept open by the child
        started: list[subprocess.Popen[bytes]] = []
        ready = threading.Event()

        def keeper() -> None:
            # PDEATHSIG fires when the *thread* that forked the child ends: this thread lives
            # exactly as long as the service (waiting on it), so only our death ends it.
            try:
                proc = subprocess.Popen(
                    [PODMAN, *self.flags, "system", "service", "--time=0", f"unix://{sock}"],
                    env=podman_env(),
                    # conmon, started by the service, writes a file named `oom` into its working
                    # folder when a container is OOM-killed: ours, never the caller's checkout.
                    cwd=folder,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    preexec_fn=_die_with_parent,  # noqa: PLW1509 - prctl needs the child side
                    close_fds=True,
                    start_new_session=True,  # a terminal's Ctrl-C reaches it through our exit
                )
            except OSError as exc:
                log.write(f"could not start podman: {exc}\n".encode())
                ready.set()
                return
            started.append(proc)
            ready.set()
            proc.wait()

        threading.Thread(target=keeper, name="aes-podman-service", daemon=True).start()
        ready.wait(10)
        if not started:
            raise EngineUnavailableError(self._why(folder, "podman did not start"))
        proc = started[0]
        url = f"unix://{sock}"
        deadline = time.monotonic() + SERVICE_START_SEC
        while True:
            if proc.poll() is not None:
                raise EngineUnavailableError(
                    self._why(folder, f"podman exited ({proc.returncode})")
                )
            if sock.exists():
                try:
                    docker.DockerClient(base_url=url, timeout=5).ping()
                    break
                except Exception:  # noqa: BLE001 - not answering yet
                    pass
            if time.monotonic() > deadline:
                proc.kill()
                raise wedged_error(
                    self._why(folder, f"podman's API did not answer in {SERVICE_START_SEC:g} s")
                )
            time.sleep(0.05)
        self.proc, self.folder, self.url, self.pid = proc, folder, url, os.getpid()
        return url

    @staticmethod
    def _why(folder: Path, what: str) -> str:
        try:
            tail = (folder / "service.log").read_text(errors="replace")[-800:]
        except OSError:
            tail = ""
        return f"{what}: {tail.strip() or 'no output'} (podman system service, CONTAINERS_CONF)"

    def stop(self) -> None:
        with self.lock:
            proc, folder = self.proc, self.folder
            self.proc = self.folder = self.url = None
        if proc is None or self.pid != os.getpid():
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


_SERVICE = _Service()
atexit.register(_SERVICE.stop)
#: One service per set of global flags (a sandbox runtime's); () is `_SERVICE`, runc's.
_SERVICES: dict[tuple[str, ...], _Service] = {(): _SERVICE}
_SERVICES_LOCK = threading.Lock()


def _service(flags: tuple[str, ...]) -> _Service:
    with _SERVICES_LOCK:
        if flags not in _SERVICES:
            _SERVICES[flags] = _Service(flags)
            atexit.register(_SERVICES[flags].stop)
        return _SERVICES[flags]


def stop_service() -> None:
    """Stop this process's podman service and forget its clients; the next call starts a fresh
    one (what a process's exit does, without exiting: the soak benchmark churns services)."""
    with _SERVICES_LOCK:
        services = list(_SERVICES.values())
    for service in services:
        service.stop()
    with _CLIENTS_LOCK:
        for key in [k for k in _CLIENTS if k[0] == "podman"]:
            _CLIENTS.pop(key).close()


def engine_url(backend: Backend, flags: tuple[str, ...] = ()) -> str | None:
    """The API socket for `backend` (podman: ours, started now if needed, with the global
    `flags` of a sandbox runtime; docker: DOCKER_HOST)."""
    if backend == "podman":
        return _service(flags).ensure()
    if backend == "docker":
        return os.environ.get("DOCKER_HOST")
    raise SandboxError(f"unknown engine {backend!r}: podman or docker")


_CLIENTS: dict[tuple[str, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def client(backend: Backend = "podman", flags: tuple[str, ...] = ()) -> Any:
    """A cached `docker.DockerClient` for the engine (podman's service is started if needed;
    `flags`: the service of a sandbox runtime, runtimes.py)."""
    url = engine_url(backend, flags)
    key = (backend, url)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            try:
                made = (
                    docker.DockerClient(
                        base_url=url, max_pool_size=32, timeout=int(ENGINE_CALL_SEC)
                    )
                    if url
                    else docker.from_env(max_pool_size=32, timeout=int(ENGINE_CALL_SEC))
                )
                made.ping()
            except Exception as exc:
                if is_timeout(exc):
                    raise wedged_error(
                        f"no answer from the {backend} engine's ping within {ENGINE_CALL_SEC:g} s",
                        backend,
                    ) from exc
                raise EngineUnavailableError(
                    f"no {backend} engine answers at {url or 'the default socket'}: {exc}. "
                    + (
                        "Start dockerd (see .ci/docker-tier) or set DOCKER_HOST."
                        if backend == "docker"
                        else "See `autoenvscaling doctor`."
                    )
                ) from exc
            _CLIENTS[key] = made
        return _CLIENTS[key]


def cli_argv(backend: Backend) -> tuple[list[str], dict[str, str]]:
    """The engine's own CLI (absolute path) and the fixed environment to run it with."""
    if backend == "podman":
        return [PODMAN], podman_env()
    found = shutil.which("docker")
    if found is None:
        raise SandboxError(
            "the docker engine's persistent shell needs the docker CLI on PATH "
            "(apt-get install docker.io, or docker-ce-cli)"
        )
    env = {"PATH": FIXED_PATH, "HOME": os.environ.get("HOME", "/root")}
    if url := engine_url("docker"):
        env["DOCKER_HOST"] = url
    return [os.path.realpath(found)], env
