"""Which sandbox backends work on this machine, and exactly why not for the others."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess

from pydantic import BaseModel

from autoenvscaling.tools.sandbox import cgroups


class BackendStatus(BaseModel):
    name: str
    ok: bool
    detail: str


async def check_bwrap(start: bool = True) -> BackendStatus:
    missing = [t for t in ("bwrap", "unshare", "nsenter") if not shutil.which(t)]
    if missing:
        return BackendStatus(
            name="bwrap",
            ok=False,
            detail=f"missing {', '.join(missing)} (apt-get install bubblewrap)",
        )
    if os.geteuid() != 0:
        return BackendStatus(
            name="bwrap",
            ok=False,
            detail="needs root to mount the per-sandbox overlay (run as root)",
        )
    from autoenvscaling.tools.sandbox.rootfs import base_rootfs_path

    base = base_rootfs_path()
    has_base = (base.parent / f"{base.name}.ready").exists()
    if not has_base and not shutil.which("debootstrap"):
        return BackendStatus(
            name="bwrap",
            ok=False,
            detail="no base rootfs and no debootstrap (apt-get install debootstrap)",
        )
    limits = cgroups.available()
    how = ", ".join(f"{k}: {'cgroup v1' if v else 'not enforced'}" for k, v in limits.items())
    if start and has_base:
        from autoenvscaling.tools.sandbox.bwrap import start_workspace

        try:
            sandbox = await start_workspace()
            result = await sandbox.exec("true", timeout_sec=10)
            await sandbox.close()
            if result.exit_code != 0:
                return BackendStatus(
                    name="bwrap", ok=False, detail=f"probe failed: {result.stderr}"
                )
        except Exception as exc:
            return BackendStatus(name="bwrap", ok=False, detail=f"probe failed: {exc}")
    state = "base rootfs ready" if has_base else "base rootfs is built on first use (~1-2 min)"
    return BackendStatus(name="bwrap", ok=True, detail=f"{state}; limits {how}")


def check_docker() -> BackendStatus:
    """Our `docker` backend: the SDK reaches an engine (compose not needed)."""
    try:
        import docker

        engine = docker.from_env(timeout=5)  # a short probe; not the sandboxes' shared client
        version = engine.version().get("Version", "?")
    except Exception as exc:
        return BackendStatus(
            name="docker",
            ok=False,
            detail=f"no Docker engine answers ({exc}); start dockerd (see .ci/docker-tier) "
            "or set DOCKER_HOST",
        )
    from autoenvscaling.tools.sandbox.docker import base_image_tag

    notes = [f"Docker engine {version} (SDK, no compose needed)"]
    try:
        engine.api.inspect_image(base_image_tag())
        notes.append("project base image present")
    except Exception:
        notes.append(
            "no project base image yet: tasks need their FROM images in the engine "
            "(python -m autoenvscaling.tools.sandbox.docker bases imports them, no registry)"
        )
    if not shutil.which("docker"):
        notes.append("no docker CLI on PATH: the persistent shell will not start")
    return BackendStatus(name="docker", ok=True, detail="; ".join(notes))


def check_harbor_docker() -> BackendStatus:
    """Harbor's own docker backend (`-e docker`): it drives `docker compose` v2."""
    if not shutil.which("docker"):
        return BackendStatus(
            name="harbor-docker",
            ok=False,
            detail="Harbor's docker backend needs the docker CLI, which is not on PATH; "
            "use the `docker` backend (SDK) instead",
        )
    done = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        return BackendStatus(
            name="harbor-docker",
            ok=False,
            detail="Harbor's docker backend needs `docker compose` v2, which is missing "
            "(install the docker-compose-plugin); the `docker` backend (SDK) works without it",
        )
    engine = check_docker()
    if not engine.ok:
        return BackendStatus(name="harbor-docker", ok=False, detail=engine.detail)
    return BackendStatus(
        name="harbor-docker",
        ok=True,
        detail=f"{done.stdout.strip()}; note: tasks that allow internet get a compose bridge "
        "network, whose private addresses some machines forbid",
    )


def clean_docker() -> str:
    """Remove our stale containers (`doctor --clean`); says what it removed."""
    from autoenvscaling.tools.sandbox.docker import cleanup_stale

    try:
        report = cleanup_stale()
    except Exception as exc:
        return f"docker: nothing cleaned ({exc})"
    removed = ", ".join(report.containers) or "none"
    return f"docker: removed stale containers: {removed}"


async def diagnose(start: bool = True) -> list[BackendStatus]:
    return [
        await check_bwrap(start),
        await asyncio.to_thread(check_docker),
        await asyncio.to_thread(check_harbor_docker),
    ]


async def pick_backend() -> str:
    """Default backend: docker where an engine answers, else bwrap."""
    if (await asyncio.to_thread(check_docker)).ok:
        return "docker"
    return "bwrap"
