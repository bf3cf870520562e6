"""Task images: a task's Dockerfile built into its image, cached by content hash, or a given image.

`build_image` is the one way to an image a sandbox starts from. An unchanged task is never
rebuilt: its tag (image_tags.py) covers the environment's files and its FROM images' ids, and
builds of the same tag in parallel processes wait on one lock. Every build first refuses a
Dockerfile with what the builder must never see (`refuse_hazards`: flags, directives, remote or
unresolvable ADD/COPY sources) and a pull from a registry that is not a public one
(`refuse_pulls`: the builder pulls on the host's network), then runs on the engine
(builders.py) with no network, or, for a task the gate granted the internet, in a slirp4netns
namespace (netns.py). Removal of the images we built is image_gc.py's; its names, and
`image_tag`, are importable from here too.
"""

from __future__ import annotations

import contextlib
import stat
from pathlib import Path

import docker.errors
from pydantic import BaseModel, Field

from ..tasks.dockerfile import MAX_DOCKERFILE_BYTES, build_hazards
from ..tasks.dockerfile_sources import source_hazards
from .base import Backend, BuildError, SandboxError
from .builders import Log, build_docker, build_podman
from .cache_lock import BUILDS, CacheLock, hold_image, tag_lock_name
from .engine import PODMAN, call, client, inspect_image
from .image_gc import gc_images, remove_task_image
from .image_tags import image_id as _image_id
from .image_tags import image_tag
from .image_tags import parent_images as _parent_images
from .netns import build_namespace


class ContainerImage(BaseModel):
    """An image a sandbox can start from."""

    tag: str
    id: str
    built: bool = Field(
        default=False, description="True when this call built it (not from the cache)."
    )
    notes: list[str] = Field(default_factory=list)


def refuse_hazards(
    dockerfile: Path, task_name: str, inherited: frozenset[str] | None = None
) -> None:
    """Raise BuildError when the Dockerfile holds what the builder must never see.

    Checked at every build, whatever lint said: the gate lints, but trials, the proposer's
    `check` and hand-run builds reach here too. Debian bookworm's buildah (1.28) has
    CVE-2024-1753 (a RUN --mount from another stage through a link to / binds the host's root
    read-write) and honours parser directives differently from our reader; no newer podman is
    packaged for bookworm, so the builder is never handed a --mount or a directive. Nor an
    ADD/COPY source that is remote or that we cannot resolve (`ARG SRC=http://...` +
    `ADD ${SRC}`): the builder fetches a URL itself, on the host's network. `inherited`: the
    names the base images' ENV sets (None: unknown), which win over an ARG in the builder.
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
    if hazards := build_hazards(text) + source_hazards(text, inherited):
        said = "\n".join(f"line {h.line}: {h.message}" for h in hazards)
        raise BuildError(f"refused to build {task_name}; the builder is never given these:\n{said}")


#: Registries a FROM image missing from the engine may be pulled from. Any other registry host
#: (localhost, an address, an internal name) is refused: the builder pulls on the host's
#: network, so a task could make it connect to the host's loopback or internal services.
PUBLIC_REGISTRIES = frozenset(
    {
        "docker.io",
        "index.docker.io",
        "registry-1.docker.io",
        "quay.io",
        "ghcr.io",
        "gcr.io",
        "registry.k8s.io",
        "mcr.microsoft.com",
        "public.ecr.aws",
        "nvcr.io",
    }
)


def registry_of(image: str) -> str | None:
    """The registry host an image reference names; None for a short name (the engine's own
    search registries, set on the host, resolve it)."""
    first, slash, _ = image.partition("/")
    if slash and ("." in first or ":" in first or first.lower() == "localhost"):
        return first.lower()
    return None


def refuse_pulls(api: object, dockerfile: Path, task_name: str) -> None:
    """Raise BuildError when a FROM image the engine lacks would be pulled from a registry
    that is not a public one."""
    for parent in _parent_images(dockerfile):
        registry = registry_of(parent)
        if registry is None or registry in PUBLIC_REGISTRIES or _image_id(api, parent):
            continue
        raise BuildError(
            f"refused to build {task_name}; the builder is never given these:\nFROM {parent}: "
            f"the engine does not have this image, and the builder would pull it from "
            f"{registry} on the host's network (its loopback and internal services included). "
            f"Use an image the engine has (e.g. debian:bookworm-slim) or one from "
            f"{', '.join(sorted(PUBLIC_REGISTRIES - {'index.docker.io', 'registry-1.docker.io'}))}"
        )


def _inherited_names(api: object, dockerfile: Path) -> frozenset[str] | None:
    """The names the FROM images' ENV sets; None when one of them is not in the engine yet."""
    names: set[str] = set()
    for parent in _parent_images(dockerfile):
        try:
            env = (inspect_image(api, parent).get("Config") or {}).get("Env") or []
        except docker.errors.APIError:
            return None
        names |= {str(item).split("=", 1)[0] for item in env}
    return frozenset(names)


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
    api = client(backend).api
    dockerfile = environment_dir / "Dockerfile"
    refuse_hazards(dockerfile, task_name, _inherited_names(api, dockerfile))
    refuse_pulls(api, dockerfile, task_name)
    hold_image(tag)  # no stale-image sweep removes it while this process lives (image_gc.py)
    if not force and (found := _image_id(api, tag)):
        return ContainerImage(tag=tag, id=found)
    with CacheLock(tag_lock_name("build", tag)):  # same task built in parallel
        previous = _image_id(api, tag)
        if previous and not force:
            return ContainerImage(tag=tag, id=previous)
        build = build_podman if backend == "podman" else build_docker
        try:  # a task granted the internet: RUN steps join a slirp4netns namespace (netns.py)
            with (
                CacheLock(BUILDS, shared=True),
                build_namespace(backend) if network else contextlib.nullcontext("none") as net,
            ):
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
        registry = registry_of(docker_image)
        if found is None and registry is not None and registry not in PUBLIC_REGISTRIES:
            raise BuildError(
                f"docker_image {docker_image}: not in the engine, and it is never pulled from "
                f"{registry} (the pull runs on the host's network); use a public registry's image"
            )
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


__all__ = [
    "PODMAN",
    "ContainerImage",
    "build_image",
    "gc_images",
    "image_tag",
    "remove_task_image",
]
