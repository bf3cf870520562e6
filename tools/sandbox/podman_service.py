"""This process's own podman API service: started on first use on a private socket with our own
`containers.conf` (CONTAINERS_CONF; nothing global changed), stopped at exit, and sent SIGTERM
if this process dies (PR_SET_PDEATHSIG). One service per set of podman's global flags (a sandbox
runtime's, runtimes.py). Every podman process we start is called by absolute path with a fixed
environment (`podman_env`). The engine's clients and its watchdog are engine.py's.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import docker

from ..files.whole import write_whole
from ..scratch import make_scratch
from ..settings import get_settings
from .base import EngineUnavailableError, EngineWedgedError

PODMAN = "/usr/bin/podman"
FIXED_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# A loaded machine (many trials starting at once) has taken ~30 s to answer: be generous.
SERVICE_START_SEC = 120.0
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


def config_dir() -> Path:
    """Our engine configuration (containers.conf, seccomp profile), written on first use."""
    folder = get_settings().cache_dir / "engine"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def containers_conf() -> Path:
    path = config_dir() / "containers.conf"
    if not path.exists() or path.read_text() != CONTAINERS_CONF:
        write_whole(path, CONTAINERS_CONF)
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
        # A scratch folder naming its owner: a SIGKILLed process never reaches stop(), and the
        # next process's sweep (cleanup.cleanup_stale) removes the folder once the owner is gone.
        folder = make_scratch(f"aes-podman-{os.getpid()}-")
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
                raise EngineWedgedError(
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


def service_for(flags: tuple[str, ...]) -> _Service:
    """This process's service for podman's global `flags` (() is runc's), made on first use."""
    with _SERVICES_LOCK:
        if flags not in _SERVICES:
            _SERVICES[flags] = _Service(flags)
            atexit.register(_SERVICES[flags].stop)
        return _SERVICES[flags]


def stop_services() -> None:
    """Stop every podman service this process started; the next use starts a fresh one."""
    with _SERVICES_LOCK:
        services = list(_SERVICES.values())
    for service in services:
        service.stop()
