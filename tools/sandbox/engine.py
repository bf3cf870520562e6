"""The container engine a sandbox runs on: podman (default, started by us) or a docker daemon.

Both are driven through the `docker` SDK. For podman, each process that needs it starts its own
`podman system service` (podman_service.py). Containers and images live in podman's shared
storage, so a sandbox started by one process is reachable from another process's service. For
docker, the daemon at DOCKER_HOST (or the default socket) must already answer.

Every program started here is called by absolute path with a fixed environment.

A watchdog bounds every API call: one that does not answer within `ENGINE_CALL_SEC` (the SDK's
read timeout) raises `EngineWedgedError`, an infrastructure failure whose message is the state of
the engine's storage (engine_health.py: locks held, layers left incomplete, hidden mounts) and
the commands that bring it back. A wedged engine never turns into a silent wait.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import shutil
import threading
import time
from collections.abc import Callable
from typing import Any

import docker
import docker.errors
import requests.exceptions

from . import engine_health
from .base import (
    Backend,
    EngineUnavailableError,
    EngineWedgedError,
    SandboxError,
)
from .podman_service import (
    FIXED_PATH,
    PODMAN,
    cli_answers,
    config_dir,
    containers_conf,
    podman_env,
    service_for,
    stop_services,
)

# Names other modules take from here: the engine's one front door.
__all__ = [
    "ENGINE_CALL_SEC",
    "LISTING_SEC",
    "FIXED_PATH",
    "PODMAN",
    "EngineUnavailableError",
    "EngineWedgedError",
    "call",
    "cli_answers",
    "cli_argv",
    "client",
    "config_dir",
    "containers_conf",
    "engine_url",
    "inspect_image",
    "is_timeout",
    "podman_env",
    "stop_service",
    "wedge_now",
    "wedged_error",
]

#: The watchdog's bound on one answer of the engine's API. podman answers in milliseconds; its
#: slowest answers seen here (a loaded 2-core machine) took ~30 s.
ENGINE_CALL_SEC = 60.0

#: The bound on a listing of the engine's images: podman reads every image's layers to answer
#: (~55 ms an image here, whatever the filter), so a store of thousands takes minutes and is not
#: a wedge.
LISTING_SEC = 900.0


def wedged_error(what: str, backend: Backend = "podman") -> EngineWedgedError:
    """`what` did not answer: the error, with what the engine's storage shows now."""
    if backend != "podman":
        return EngineWedgedError(f"{what} (the {backend} engine did not answer)")

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


def wedge_now(bound: float = 15.0) -> EngineWedgedError | None:
    """The error when podman is wedged now (a fresh process gets no answer within `bound`, or
    its storage has a layer left incomplete or a hidden mount); None when it is healthy. For a
    CLI call of ours that ran past its own deadline: the engine's fault, or the work's."""
    if cli_answers(bound) is None:
        return wedged_error(f"`podman ps -a` did not answer within {bound:g} s")

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


def stop_service() -> None:
    """Stop this process's podman service and forget its clients; the next call starts a fresh
    one (what a process's exit does, without exiting: the soak benchmark churns services)."""
    stop_services()
    with _CLIENTS_LOCK:
        for key in [k for k in _CLIENTS if k[0] == "podman"]:
            _CLIENTS.pop(key).close()


def engine_url(backend: Backend, flags: tuple[str, ...] = ()) -> str | None:
    """The API socket for `backend` (podman: ours, started now if needed, with the global
    `flags` of a sandbox runtime; docker: DOCKER_HOST)."""
    if backend == "podman":
        try:
            return service_for(flags).ensure()
        except EngineWedgedError as exc:  # with what the engine's storage shows now
            raise wedged_error(str(exc)) from exc
    if backend == "docker":
        return os.environ.get("DOCKER_HOST")
    raise SandboxError(f"unknown engine {backend!r}: podman or docker")


_CLIENTS: dict[tuple[str, str | None, float], Any] = {}
_CLIENTS_LOCK = threading.Lock()


def client(
    backend: Backend = "podman", flags: tuple[str, ...] = (), bound: float = ENGINE_CALL_SEC
) -> Any:
    """A cached `docker.DockerClient` for the engine (podman's service is started if needed;
    `flags`: the service of a sandbox runtime, runtimes.py; `bound`: its read timeout, longer
    only for a call whose answer grows with the store, LISTING_SEC)."""
    url = engine_url(backend, flags)
    key = (backend, url, bound)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            try:
                made = (
                    docker.DockerClient(base_url=url, max_pool_size=32, timeout=int(bound))
                    if url
                    else docker.from_env(max_pool_size=32, timeout=int(bound))
                )
                made.ping()
            except Exception as exc:
                if is_timeout(exc):
                    raise wedged_error(
                        f"no answer from the {backend} engine's ping within {bound:g} s",
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
