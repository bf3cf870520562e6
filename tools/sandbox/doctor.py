"""Which engines work on this machine, exactly why not for the others, which disk cap applies,
and whether podman's storage is wedged (with the commands that bring it back)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess

from pydantic import BaseModel

from . import engine_health
from .base import Backend
from .bases import BaseImageMissingError, require_base
from .cleanup import cleanup_stale
from .container import start_workspace
from .engine import PODMAN, cli_answers, client
from .image_gc import sweep_stale_images
from .layercap import mechanism
from .runtimes import choice


class BackendStatus(BaseModel):
    name: str
    ok: bool
    detail: str


PODMAN_PACKAGES = {
    "/usr/bin/podman": "podman",
    "/usr/sbin/runc": "runc",
    "/usr/bin/newuidmap": "uidmap",
    "/usr/bin/catatonit": "catatonit",
}


async def _probe(backend: Backend) -> str | None:
    """Start a workspace and run `true` in it; None when it worked, else why not."""
    try:
        sandbox = await start_workspace(backend=backend)
        try:
            result = await sandbox.exec("true", timeout_sec=30)
        finally:
            await sandbox.close()
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        return f"{type(exc).__name__}: {exc}"
    return None if result.exit_code == 0 else f"`true` exited {result.exit_code}: {result.stderr}"


def _base_note(backend: Backend) -> tuple[bool, str]:
    try:
        return True, f"base image {require_base(backend)} present"
    except BaseImageMissingError as exc:
        return False, str(exc)


async def check_podman(start: bool = True) -> BackendStatus:
    missing = [pkg for path, pkg in PODMAN_PACKAGES.items() if not os.access(path, os.X_OK)]
    if missing:
        return BackendStatus(
            name="podman",
            ok=False,
            detail=f"missing {', '.join(missing)} (apt-get install {' '.join(missing)}; "
            "`make system` does it)",
        )
    if os.geteuid() != 0:
        return BackendStatus(
            name="podman", ok=False, detail="runs rootful: run as root (rootless is not set up)"
        )

    try:
        version = (await asyncio.to_thread(client, "podman")).version().get("Version", "?")
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        return BackendStatus(name="podman", ok=False, detail=str(exc))
    has_base, note = await asyncio.to_thread(_base_note, "podman")
    if has_base and start and (why := await _probe("podman")):
        return BackendStatus(name="podman", ok=False, detail=f"probe failed: {why}")
    return BackendStatus(
        name="podman",
        ok=has_base,
        detail=f"podman {version}, our own API service and containers.conf; {note}",
    )


async def check_docker(start: bool = True) -> BackendStatus:
    """The docker engine: a daemon answers at DOCKER_HOST or the default socket."""
    try:
        version = (await asyncio.to_thread(client, "docker")).version().get("Version", "?")
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        return BackendStatus(name="docker", ok=False, detail=str(exc))
    notes = [f"Docker engine {version} (SDK, no compose needed)"]
    has_base, note = await asyncio.to_thread(_base_note, "docker")
    notes.append(note)
    if not shutil.which("docker"):
        notes.append("no docker CLI on PATH: the persistent shell will not start")
    if has_base and start and (why := await _probe("docker")):
        return BackendStatus(name="docker", ok=False, detail=f"probe failed: {why}")
    return BackendStatus(name="docker", ok=has_base, detail="; ".join(notes))


def check_harbor_docker() -> BackendStatus:
    """Harbor's own docker backend (`-e docker`): it drives `docker compose` v2."""
    cli = shutil.which("docker")
    if not cli:
        return BackendStatus(
            name="harbor-docker",
            ok=False,
            detail="Harbor's docker backend needs the docker CLI, which is not on PATH; "
            "use the podman or docker engine instead",
        )
    done = subprocess.run(
        [os.path.realpath(cli), "compose", "version"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return BackendStatus(
            name="harbor-docker",
            ok=False,
            detail="Harbor's docker backend needs `docker compose` v2, which is missing "
            "(install the docker-compose-plugin); the podman and docker engines work without it",
        )
    return BackendStatus(
        name="harbor-docker",
        ok=True,
        detail=f"{done.stdout.strip()}; note: it does not apply our hardened profile",
    )


#: How long `doctor` waits for `podman ps -a` before it calls the engine wedged. A healthy one
#: answers in well under a second; one retrying a stuck layer's deletion takes ~10 s a process.
ENGINE_ANSWER_SEC = 30.0


def check_engine_health() -> BackendStatus:
    """podman's storage, read without asking podman (engine_health.py), and one bounded
    `podman ps -a`: wedged when that does not answer, or when a layer is left incomplete or a
    mount hidden. The detail says the state and the exact commands that recover it."""
    name = "engine health (podman)"
    if not os.access(PODMAN, os.X_OK):
        return BackendStatus(name=name, ok=True, detail="podman is not installed: nothing to check")
    took = cli_answers(ENGINE_ANSWER_SEC)
    health = engine_health.read()
    faults = health.faults
    if took is not None and not faults:
        return BackendStatus(
            name=name, ok=True, detail=f"`podman ps` answered in {took:.1f} s; {health.describe()}"
        )
    what = (
        f"WEDGED: `podman ps` did not answer in {ENGINE_ANSWER_SEC:g} s"
        if took is None
        else f"`podman ps` answered in {took:.1f} s, but: {'; '.join(faults)}"
    )
    steps = "\n".join(f"  {step}" for step in health.recovery()) or "  (no step found: see state)"
    return BackendStatus(
        name=name,
        ok=False,
        detail=f"{what}\nstate: {health.describe()}\nto recover, as root, in order:\n{steps}",
    )


def check_layer_cap(backend: Backend = "podman") -> BackendStatus:
    try:
        return BackendStatus(name=f"layer-cap ({backend})", ok=True, detail=mechanism(backend))
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        return BackendStatus(name=f"layer-cap ({backend})", ok=False, detail=str(exc))


def check_runtime() -> BackendStatus:
    """Which OCI runtime podman sandboxes run under, and why (runtimes.py's self-check)."""
    try:
        chosen = choice("podman")
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        return BackendStatus(name="sandbox runtime", ok=False, detail=str(exc))
    return BackendStatus(
        name="sandbox runtime", ok=True, detail=f"{chosen.runtime}: {chosen.reason}"
    )


def clean_docker() -> list[str]:
    """Remove stale containers, task images and scratch of exited runs (`doctor --clean`);
    says what."""
    lines = []
    for backend in ("podman", "docker"):
        try:
            report = cleanup_stale(client(backend).api)
        except Exception as exc:  # noqa: BLE001 - an engine that is not here
            lines.append(f"{backend}: nothing cleaned ({exc})")
            continue
        try:  # other processes sweep too: a listing they keep changing is not the containers'
            swept = sweep_stale_images(backend)
            images = f"{len(swept.images)}" + (
                f" ({len(swept.kept)} in use, kept)" if swept.kept else ""
            )
        except Exception as exc:  # noqa: BLE001 - said on the line; the next sweep tries again
            images = f"not swept ({exc})"
        lines.append(
            f"{backend}: removed stale containers: {', '.join(report.containers) or 'none'}; "
            f"stale task images: {images}; scratch folders: {len(report.scratch)}"
        )
    return lines


async def diagnose(start: bool = True) -> list[BackendStatus]:
    health = await asyncio.to_thread(check_engine_health)
    if health.detail.startswith("WEDGED"):
        # Every podman call would wait out its bound: report the wedge, do not wait on it.
        skipped = "not checked: podman's storage is wedged (see engine health)"
        return [
            health,
            BackendStatus(name="podman", ok=False, detail=skipped),
            await check_docker(start),
            await asyncio.to_thread(check_harbor_docker),
            BackendStatus(name="layer-cap (podman)", ok=False, detail=skipped),
        ]
    return [
        health,
        await check_podman(start),
        await check_docker(start),
        await asyncio.to_thread(check_harbor_docker),
        await asyncio.to_thread(check_layer_cap),
        await asyncio.to_thread(check_runtime),
    ]
