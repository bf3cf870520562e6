"""Fixtures for the docker tier (no tests here). A real engine or a skip that says why.

`.ci/docker-tier` starts dockerd and runs `pytest -m docker`; when dockerd cannot start it sets
AUTOENVSCALING_DOCKER_SKIP_REASON and every docker test is reported SKIPPED with that reason.
The main tier skips them the same way when no engine answers.
"""

from __future__ import annotations

import os

import pytest

SKIP_ENV = "AUTOENVSCALING_DOCKER_SKIP_REASON"


@pytest.fixture(scope="session")
def docker_engine():
    """The SDK client of a live engine that has the bases the seed pool builds FROM."""
    reason = os.environ.get(SKIP_ENV)
    if reason:
        pytest.skip(f"docker tier: dockerd did not start: {reason}")
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach an engine is a skip
        pytest.skip(f"no Docker engine answers ({exc}); .ci/docker-tier starts one")
    from autoenvscaling.tools.sandbox.docker import (
        SEED_BASE_TAGS,
        base_image_tag,
        client,
        ensure_base_image,
    )

    engine = client()
    wanted = [base_image_tag(), *SEED_BASE_TAGS]
    present = {tag for image in engine.api.images() for tag in image.get("RepoTags") or []}
    if not set(wanted) <= present:
        ensure_base_image(SEED_BASE_TAGS)  # registry-free: the bwrap base rootfs, imported
    return engine


@pytest.fixture
async def dworkspace(docker_engine):
    from autoenvscaling.tools.sandbox import SandboxLimits
    from autoenvscaling.tools.sandbox.docker import start_workspace

    sandbox = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64))
    yield sandbox
    await sandbox.close()
