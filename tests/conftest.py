"""Shared fixtures. Everything here is real: sandboxes, Harbor trials, SQLite, MCP sessions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

for _var, _value in (
    ("HARBOR_TELEMETRY", "0"),
    ("LANGGRAPH_CLI_NO_ANALYTICS", "1"),
    ("LANGGRAPH_NO_VERSION_CHECK", "1"),
    ("TRL_EXPERIMENTAL_SILENCE", "1"),
):
    os.environ.setdefault(_var, _value)

# One-time set-up runs before the first test, never inside a test's time limit.
from .one_time_setup import (  # noqa: E402, F401 - pytest hooks, found by name
    pytest_collection_finish,
    pytest_runtest_makereport,
    pytest_runtest_protocol,
)

REPO = Path(__file__).resolve().parents[1]
SEED_DIR = REPO / "tasks" / "seed"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def seed_tasks() -> list[Path]:
    return (
        sorted(p for p in SEED_DIR.iterdir() if (p / "task.toml").exists())
        if SEED_DIR.exists()
        else []
    )


DOCKER_SKIP_ENV = "AUTOENVSCALING_DOCKER_SKIP_REASON"
#: Every engine-parametrised test runs on podman (the default) and, in the docker tier
#: (`.ci/docker-tier`, `pytest -m docker`), on docker.
ENGINES = [
    pytest.param("podman", id="podman"),
    pytest.param("docker", id="docker", marks=pytest.mark.docker),
]


def require_engine(backend: str) -> None:
    """The engine answers and has the base image, or the test fails (podman) / skips (docker
    outside its tier) with what to do. Never builds anything: that is `make bases`."""
    from autoenvscaling.tools.sandbox.bases import BaseImageMissingError, require_base
    from autoenvscaling.tools.sandbox.engine import EngineUnavailableError

    if backend == "docker":
        if reason := os.environ.get(DOCKER_SKIP_ENV):
            pytest.skip(f"docker tier: dockerd did not start: {reason}")
        try:
            require_base("docker")
        except EngineUnavailableError as exc:
            pytest.skip(f"no docker daemon answers ({str(exc)[:80]}); .ci/docker-tier starts one")
        except BaseImageMissingError as exc:
            pytest.fail(str(exc), pytrace=False)
        return
    try:
        require_base("podman")
    except (EngineUnavailableError, BaseImageMissingError) as exc:
        pytest.fail(f"podman is not usable here: {exc} (run `make setup`)", pytrace=False)


@pytest.fixture(scope="session")
def engine_ready() -> str:
    """The default engine (podman) with the base image; fails clearly if either is missing."""
    require_engine("podman")
    return "podman"


@pytest.fixture(scope="session", params=ENGINES)
def engine(request) -> str:
    """Each engine in turn (docker only in the docker tier)."""
    require_engine(request.param)
    return request.param


@pytest.fixture
async def workspace(engine_ready):
    from autoenvscaling.tools.sandbox import SandboxLimits
    from autoenvscaling.tools.sandbox.container import start_workspace

    sandbox = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64))
    yield sandbox
    await sandbox.close()


@pytest.fixture
async def eworkspace(engine):
    """A workspace on each engine."""
    from autoenvscaling.tools.sandbox import SandboxLimits
    from autoenvscaling.tools.sandbox.container import start_workspace

    sandbox = await start_workspace(backend=engine, limits=SandboxLimits(memory_mb=256, pids=64))
    yield sandbox
    await sandbox.close()


@pytest.fixture(scope="session")
def docker_engine():
    """The docker engine's SDK client (docker tier only; skipped elsewhere)."""
    require_engine("docker")
    from autoenvscaling.tools.sandbox.engine import client

    return client("docker")


@pytest.fixture(scope="session")
def engine_client(engine):
    """The SDK client of each engine in turn."""
    from autoenvscaling.tools.sandbox.engine import client

    return client(engine)


def mounted_on(folder: Path) -> list[str]:
    """The filesystem types mounted on `folder` (this process's view, the engine's too)."""
    mounts = [m.split() for m in Path("/proc/self/mounts").read_text().splitlines()]
    return [m[2] for m in mounts if m[1] == str(folder)]


def container_running(box) -> bool:
    """Whether the sandbox's container still runs, asked of the engine (no exec, so it works at
    the pids limit too)."""
    from autoenvscaling.tools.sandbox.engine import client

    try:
        state = client(box.backend).api.inspect_container(box.container_id)["State"]
    except Exception:  # noqa: BLE001 - gone
        return False
    return bool(state.get("Running"))


# A real PostgreSQL server for the store and checkpointer tests (tests/postgres_server.py).
from .postgres_server import postgres_server, postgres_url  # noqa: E402, F401


@pytest.fixture
def shared_verifier_opt_in(monkeypatch):
    """good_task states no verifier mode (Harbor's shared, a root agent): opted in to training
    on it, for tests whose subject is the step plan (tests/security/test_shared_training.py: the
    rule)."""
    from autoenvscaling.tools.settings import get_settings

    monkeypatch.setenv("AUTOENVSCALING_TRAIN_SHARED_VERIFIER", "1")
    get_settings.cache_clear()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()
