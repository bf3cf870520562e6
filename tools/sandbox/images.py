"""Task images: real Dockerfile builds, cached by content hash, with no network, and their removal.

A task image is `autoenvscaling/<task>:<hash>`, the hash covering the environment's files and the
ids of its FROM images, so an unchanged task is never rebuilt. podman builds go through the
`podman build` CLI (podman 4.3's API service runs build steps in the host network whatever it is
asked); docker builds through the SDK. Both with `--network none` and the hardened profile;
a task the gate granted the internet builds in a slirp4netns namespace (netns.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import docker.errors
from pydantic import BaseModel, Field

from autoenvscaling.tools.sandbox import buildjail, cleanup, profile
from autoenvscaling.tools.sandbox.base import Backend, BuildError, SandboxError
from autoenvscaling.tools.sandbox.cleanup import (
    BASE_REPO,
    IMAGE_REPO,
    LABEL,
    OWNER_LABEL,
    RUN_LABEL,
    TASK_LABEL,
    CleanupReport,
    labels,
)
from autoenvscaling.tools.sandbox.engine import (
    PODMAN,
    call,
    cli_argv,
    client,
    config_dir,
    inspect_image,
)
from autoenvscaling.tools.sandbox.netns import build_namespace
from autoenvscaling.tools.settings import get_settings
from autoenvscaling.tools.tasks.dockerfile import (
    MAX_DOCKERFILE_BYTES,
    Dockerfile,
    DockerfileError,
    build_hazards,
)

Log = Callable[[str], None]


class ContainerImage(BaseModel):
    """An image a sandbox can start from."""

    tag: str
    id: str
    built: bool = Field(
        default=False, description="True when this call built it (not from the cache)."
    )
    notes: list[str] = Field(default_factory=list)


def _repo_name(task_name: str) -> str:
    name = re.sub(r"[^a-z0-9._-]", "-", task_name.lower()).strip(".-_") or "task"
    return f"{IMAGE_REPO}/{name[:100]}"


def _parent_images(dockerfile: Path) -> list[str]:
    try:
        return Dockerfile.read(dockerfile).base_images()
    except DockerfileError:
        return []  # the build itself fails on an unreadable Dockerfile and says why


def _image_id(api: Any, name: str) -> str | None:
    try:
        return str(inspect_image(api, name)["Id"])
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:  # podman: "no such image" with other codes
        if "no such image" in str(exc).lower() or "not known" in str(exc).lower():
            return None
        raise


def image_tag(task_name: str, environment_dir: Path, backend: Backend = "podman") -> str:
    """`autoenvscaling/<task>:<hash>` of the environment's files and of the FROM images' ids."""
    from harbor.environments.definition import environment_content_hash

    digest = hashlib.sha256(environment_content_hash(environment_dir, truncate=64).encode())
    dockerfile = environment_dir / "Dockerfile"
    if dockerfile.exists():
        api = client(backend).api
        for parent in _parent_images(dockerfile):
            digest.update((_image_id(api, parent) or parent).encode())
    return f"{_repo_name(task_name)}:{digest.hexdigest()[:16]}"


class _lock:
    """An exclusive file lock in the cache folder (held across processes)."""

    def __init__(self, name: str) -> None:
        self.path = config_dir() / f"{name}.lock"

    def __enter__(self) -> None:
        self.handle = open(self.path, "w")  # noqa: SIM115 - closed in __exit__
        fcntl.flock(self.handle, fcntl.LOCK_EX)

    def __exit__(self, *exc: object) -> None:
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def _missing_hint(api: Any, dockerfile: Path) -> str:
    missing = [p for p in _parent_images(dockerfile) if _image_id(api, p) is None]
    if not missing:
        return ""
    return (
        f"\nFROM {', '.join(missing)}: not in the engine and no registry answered. Import the "
        f"project's Debian base under that name: make bases (or python -m "
        f"autoenvscaling.tools.sandbox.bases {' '.join(missing)})"
    )


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


def _build_podman(
    environment_dir: Path,
    tag: str,
    task_name: str,
    force: bool,
    timeout_sec: float,
    say: Log,
    network: str = "none",
) -> None:
    argv, env = cli_argv("podman")
    cmd = [*argv, "build", "--network", network, "--layers", "--rm", "--force-rm", "-t", tag]
    for key, value in labels(**{TASK_LABEL: task_name}).items():
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
    hint = _missing_hint(client("podman").api, environment_dir / "Dockerfile")
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
        raise BuildError(
            f"podman build of {task_name} timed out after {timeout_sec:.0f} s\n"
            f"{out.decode(errors='replace')[-1500:]}"
        ) from None
    return proc.returncode, out.decode(errors="replace")


def _build_docker(
    environment_dir: Path,
    tag: str,
    task_name: str,
    force: bool,
    timeout_sec: float,
    say: Log,
    network: str = "none",  # always: netns.check_network refuses docker a network
) -> None:
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
            labels=labels(**{TASK_LABEL: task_name}),
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
        hint = _missing_hint(api, environment_dir / "Dockerfile")
        tail = "".join(log)[-1500:]
        raise BuildError(f"docker build of {task_name} failed: {error}\n{tail}{hint}")


def refuse_hazards(dockerfile: Path, task_name: str) -> None:
    """Raise BuildError when the Dockerfile holds what the builder must never see.

    Checked at every build, whatever lint said: the gate lints, but trials, the proposer's
    `check` and hand-run builds reach here too. Debian bookworm's buildah (1.28) has
    CVE-2024-1753 (a RUN --mount from another stage through a link to / binds the host's root
    read-write) and honours parser directives differently from our reader; no newer podman is
    packaged for bookworm, so the builder is never handed a --mount or a directive.
    """
    try:
        info = dockerfile.lstat()
        if not stat.S_ISREG(info.st_mode):  # a link may point anywhere, a FIFO blocks the read
            raise BuildError(f"{task_name}: the Dockerfile is not a regular file")
        if info.st_size > MAX_DOCKERFILE_BYTES:
            raise BuildError(f"{task_name}: the Dockerfile is over {MAX_DOCKERFILE_BYTES} bytes")
        text = dockerfile.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise BuildError(f"{task_name}: cannot read the Dockerfile: {exc}") from None
    if hazards := build_hazards(text):
        said = "\n".join(f"line {h.line}: {h.message}" for h in hazards)
        raise BuildError(f"refused to build {task_name}; the builder is never given these:\n{said}")


def _build_locked(
    backend: Backend,
    environment_dir: Path,
    tag: str,
    task_name: str,
    force: bool,
    timeout_sec: float,
    say: Log,
    network: bool = False,
) -> ContainerImage:
    refuse_hazards(environment_dir / "Dockerfile", task_name)
    api = client(backend).api
    if not force and (found := _image_id(api, tag)):
        return ContainerImage(tag=tag, id=found)
    with _lock(f"build-{tag.replace('/', '_').replace(':', '_')}"):  # same task built in parallel
        previous = _image_id(api, tag)
        if previous and not force:
            return ContainerImage(tag=tag, id=previous)
        build = _build_podman if backend == "podman" else _build_docker
        try:  # a task granted the internet: RUN steps join a slirp4netns namespace (netns.py)
            with build_namespace(backend) if network else contextlib.nullcontext("none") as net:
                build(environment_dir, tag, task_name, force, timeout_sec, say, net)
        except SandboxError as exc:
            raise BuildError(str(exc)) from None
        image_id = _image_id(api, tag)
        if image_id is None:
            raise BuildError(f"the build of {task_name} reported success but made no image")
        if previous and previous != image_id:
            try:  # a forced rebuild leaves the old image nameless: drop it unless a container uses it
                api.remove_image(previous, force=False, noprune=False)
            except docker.errors.APIError:
                pass
        return ContainerImage(tag=tag, id=image_id, built=True)


async def build_image(
    environment_dir: Path,
    *,
    backend: Backend = "podman",
    task_name: str | None = None,
    docker_image: str | None = None,
    force: bool = False,
    timeout_sec: float = 600,
    log: Log | None = None,
    network: bool = False,
) -> ContainerImage:
    """Build `environment/Dockerfile` (cached by content hash), or use `docker_image` as is.
    `network`: RUN steps may reach the internet (a task granted it; netns.py), never the
    host's loopback."""
    say = log or (lambda _msg: None)
    environment_dir = Path(environment_dir).resolve()
    task_name = task_name or environment_dir.parent.name
    api = (await call(client, backend)).api
    if not (environment_dir / "Dockerfile").exists():
        if not docker_image:
            raise BuildError(f"{environment_dir}: no Dockerfile and no docker_image")
        found = await call(_image_id, api, docker_image)
        if found is None:
            try:
                say(f"pulling {docker_image}")
                await call(api.pull, docker_image)
                found = await call(_image_id, api, docker_image)
            except Exception as exc:
                raise BuildError(
                    f"docker_image {docker_image}: not in the engine and could not be pulled: {exc}"
                ) from exc
            if found is None:  # podman reports a failed pull in the stream, not as an error
                raise BuildError(
                    f"docker_image {docker_image}: not in the engine and could not be pulled"
                )
        return ContainerImage(tag=docker_image, id=found)
    tag = await call(image_tag, task_name, environment_dir, backend)
    return await call(
        _build_locked, backend, environment_dir, tag, task_name, force, timeout_sec, say, network
    )


# -- removal -------------------------------------------------------------------------------------
def _ours(image: dict[str, Any]) -> bool:
    tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
    names = [t.removeprefix("localhost/") for t in tags]
    return all(t.startswith(f"{IMAGE_REPO}/") and not t.startswith(BASE_REPO) for t in names)


def gc_images(keep: Iterable[str], *, backend: Backend = "podman") -> CleanupReport:
    """Remove the task images we built, except those named in `keep` (tags or image ids).

    Only images labelled `autoenvscaling=1` whose every tag is `autoenvscaling/...` (or that
    have no tag left) are candidates; images in use by a container are skipped and reported.
    """
    api = client(backend).api
    keep = {k.removeprefix("localhost/") for k in keep}
    report = CleanupReport()
    for image in api.images(filters={"label": f"{LABEL}=1"}):
        if not _ours(image):
            continue
        tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
        if keep & {image["Id"], *(t.removeprefix("localhost/") for t in tags)}:
            continue
        try:
            for tag in tags or [image["Id"]]:
                api.remove_image(tag, force=False, noprune=False)
            report.images.extend([t.removeprefix("localhost/") for t in tags] or [image["Id"]])
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            report.kept.append(f"{tags or image['Id']}: {exc.explanation or exc}")
    return report


def remove_task_image(task_dir: Path, *, backend: Backend = "podman") -> bool:
    """Remove the image built for one task folder (a rejected candidate). False if none.

    Not an image another live run built: the tag is a content hash, so that run may be about to
    start a container from the same image. (A killed run's images go: its resume rejects them.)
    """
    api = client(backend).api
    task_dir = Path(task_dir).resolve()
    tag = image_tag(task_dir.name, task_dir / "environment", backend)
    try:
        image_labels = api.inspect_image(tag).get("Config", {}).get("Labels") or {}
    except docker.errors.APIError:  # gone (podman answers "no such image" with several codes)
        return False
    ours = image_labels.get(RUN_LABEL) == cleanup.RUN_ID
    if not ours and cleanup.owner_alive(image_labels.get(OWNER_LABEL, "")) is not False:
        return False
    try:
        api.remove_image(tag, force=False, noprune=False)
    except docker.errors.NotFound:
        return False
    return True


def pool_image_tags(task_dirs: Iterable[Path], *, backend: Backend = "podman") -> set[str]:
    """The tags the images of these task folders have (what `gc_images` should keep)."""
    return {
        image_tag(Path(d).resolve().name, Path(d).resolve() / "environment", backend)
        for d in task_dirs
        if (Path(d) / "environment" / "Dockerfile").exists()
    }


__all__ = [
    "PODMAN",
    "ContainerImage",
    "build_image",
    "gc_images",
    "image_tag",
    "pool_image_tags",
    "remove_task_image",
]
