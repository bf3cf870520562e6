"""Which engines work on this machine, exactly why not for the others, and which disk cap applies."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess

from pydantic import BaseModel

from autoenvscaling.tools.sandbox.base import Backend


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
    from autoenvscaling.tools.sandbox.container import start_workspace

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
    from autoenvscaling.tools.sandbox.bases import BaseImageMissingError, require_base

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
    from autoenvscaling.tools.sandbox.engine import client

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
    from autoenvscaling.tools.sandbox.engine import client

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


def check_layer_cap(backend: Backend = "podman") -> BackendStatus:
    from autoenvscaling.tools.sandbox.layercap import mechanism

    try:
        return BackendStatus(name=f"layer-cap ({backend})", ok=True, detail=mechanism(backend))
    except Exception as exc:  # noqa: BLE001 - the reason is the report
        return BackendStatus(name=f"layer-cap ({backend})", ok=False, detail=str(exc))


def clean_docker() -> list[str]:
    """Remove stale containers and scratch of crashed runs (`doctor --clean`); says what."""
    from autoenvscaling.tools.sandbox.cleanup import cleanup_stale

    lines = []
    for backend in ("podman", "docker"):
        try:
            report = cleanup_stale(backend)
        except Exception as exc:  # noqa: BLE001 - an engine that is not here
            lines.append(f"{backend}: nothing cleaned ({exc})")
            continue
        lines.append(
            f"{backend}: removed stale containers: {', '.join(report.containers) or 'none'}; "
            f"scratch folders: {len(report.scratch)}"
        )
    return lines


async def diagnose(start: bool = True) -> list[BackendStatus]:
    return [
        await check_podman(start),
        await check_docker(start),
        await asyncio.to_thread(check_harbor_docker),
        await asyncio.to_thread(check_layer_cap),
    ]
