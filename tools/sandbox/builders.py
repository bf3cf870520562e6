"""One build of a task's Dockerfile on an engine, in the network it is handed (`none` unless
the gate granted the task the internet; netns.py).

podman builds go through the `podman build` CLI (podman 4.3's API service runs build steps in
the host network whatever it is asked) with the hardened profile's build flags; as root, in the
read-only build namespace of buildjail.py. A build past its deadline is stopped, and one that
lost podman's layer-cache race (an image removed while it looked) is tried again, up to
BUILD_ATTEMPTS. docker builds through the SDK, always `network_mode none`. Either raises
BuildError with the output's tail (and how to import a missing FROM image). Caching, locking
and the Dockerfile hazard refusal are the caller's (images.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import docker.errors

from ..settings import get_settings
from . import buildjail, cleanup, profile
from .base import BuildError
from .cleanup import image_labels
from .engine import cli_argv, client, wedge_now
from .image_tags import missing_hint

Log = Callable[[str], None]

#: podman's layer-cache lookup fails this way when another process removes an image while the
#: build looks (a gc, a rejected candidate's image, a parallel run sharing the engine). Nothing
#: is wrong with the build: a new attempt finds the images that are left.
#: Only podman's own last line counts: a Dockerfile's RUN can print anything, this text too.
CACHE_LOOKUP_RACE = "Error: checking if cached image exists from a previous build:"
BUILD_ATTEMPTS = 3


def _lost_a_cache_race(output: str) -> bool:
    lines = [line for line in output.splitlines() if line.strip()]
    return bool(lines) and lines[-1].startswith(CACHE_LOOKUP_RACE)


@functools.lru_cache(maxsize=1)
def _store_paths() -> tuple[str, ...]:
    """podman's image store and run folder (what a build must write)."""
    argv, env = cli_argv("podman")
    out = subprocess.run(
        [*argv, "info", "--format", "{{.Store.GraphRoot}}\n{{.Store.RunRoot}}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    ).stdout
    return tuple(line.strip() for line in out.splitlines() if line.strip())


def _jailed(cmd: list[str], env: dict[str, str], tmp: Path) -> list[str]:
    """`cmd` run by buildjail.py: the host read-only but for the store, /run, shared memory,
    cgroups and `tmp` (the build's TMPDIR). Rootless podman builds in a user namespace already
    and cannot make mounts: unchanged there."""
    if os.geteuid() != 0 or not get_settings().build_jail:
        return cmd
    env["TMPDIR"] = str(tmp)
    # /var/cache/containers: the short-name alias cache a FROM debian:... writes; /var/tmp:
    # where the layer-cache lookup converts image configs, whatever TMPDIR says (world-writable)
    writable = [*_store_paths(), "/run", "/dev/shm", "/sys/fs/cgroup", "/var/cache/containers"]
    writable += ["/var/tmp", str(tmp)]
    return [sys.executable, "-I", "-S", buildjail.__file__, ":".join(writable), "--", *cmd]


def build_podman(
    environment_dir: Path,
    tag: str,
    task_name: str,
    force: bool,
    timeout_sec: float,
    say: Log,
    network: str = "none",
) -> None:
    """`podman build` of `environment_dir` into `tag`; raises BuildError."""
    argv, env = cli_argv("podman")
    cmd = [*argv, "build", "--network", network, "--layers", "--rm", "--force-rm", "-t", tag]
    for key, value in image_labels(task_name, environment_dir.parent).items():
        cmd += ["--label", f"{key}={value}"]
    cmd += profile.build_flags()
    if force:
        cmd.append("--no-cache")
    cmd += ["-f", str(environment_dir / "Dockerfile"), str(environment_dir)]
    tmp = cleanup.scratch_dir("build")
    try:
        cmd = _jailed(cmd, env, tmp)
        _build_attempts(cmd, env, environment_dir, task_name, timeout_sec, say)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _build_attempts(
    cmd: list[str],
    env: dict[str, str],
    environment_dir: Path,
    task_name: str,
    timeout_sec: float,
    say: Log,
) -> None:
    deadline = time.monotonic() + timeout_sec
    attempt = 1
    while True:
        code, text = _run_build(cmd, env, environment_dir, deadline, task_name, timeout_sec)
        for line in text.splitlines():
            if line.strip():
                say(line)
        if code == 0:
            return
        if attempt == BUILD_ATTEMPTS or not _lost_a_cache_race(text):
            break
        attempt += 1
        say(f"an image was removed during the layer-cache lookup: build attempt {attempt}")
    hint = missing_hint(client("podman").api, environment_dir / "Dockerfile")
    raise BuildError(f"podman build of {task_name} failed (exit {code}):\n{text[-1500:]}{hint}")


def _run_build(
    cmd: list[str],
    env: dict[str, str],
    cwd: Path,
    deadline: float,
    task_name: str,
    timeout_sec: float,
) -> tuple[int, str]:
    """One `podman build`: (exit code, output); raises BuildError when the deadline passes."""
    proc = subprocess.Popen(
        cmd,
        env=env,
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 1.0))
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # podman stops its build container on SIGTERM
        try:
            out, _ = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        if wedged := wedge_now():  # the engine's fault then, not the task's (issue 38)
            raise wedged from None
        raise BuildError(
            f"podman build of {task_name} timed out after {timeout_sec:.0f} s\n"
            f"{out.decode(errors='replace')[-1500:]}"
        ) from None
    return proc.returncode, out.decode(errors="replace")


def build_docker(
    environment_dir: Path,
    tag: str,
    task_name: str,
    force: bool,
    timeout_sec: float,
    say: Log,
    network: str = "none",  # always: netns.check_network refuses docker a network
) -> None:
    """docker (SDK) build of `environment_dir` into `tag`, with no network; raises BuildError."""
    api = client("docker").api
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
            network_mode="none",
            labels=image_labels(task_name, environment_dir.parent),
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
        hint = missing_hint(api, environment_dir / "Dockerfile")
        tail = "".join(log)[-1500:]
        raise BuildError(f"docker build of {task_name} failed: {error}\n{tail}{hint}")
