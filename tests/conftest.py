"""Shared fixtures. Everything here is real: sandboxes, Harbor trials, SQLite, MCP sessions."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

for _var, _value in (
    ("HARBOR_TELEMETRY", "0"),
    ("LANGGRAPH_CLI_NO_ANALYTICS", "1"),
    ("LANGGRAPH_NO_VERSION_CHECK", "1"),
    ("TRL_EXPERIMENTAL_SILENCE", "1"),
):
    os.environ.setdefault(_var, _value)

REPO = Path(__file__).resolve().parents[1]
SEED_DIR = REPO / "tasks" / "seed"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def seed_tasks() -> list[Path]:
    return (
        sorted(p for p in SEED_DIR.iterdir() if (p / "task.toml").exists())
        if SEED_DIR.exists()
        else []
    )


@pytest.fixture(scope="session")
def bwrap_ready() -> None:
    """The bwrap backend needs root, bubblewrap and a base rootfs (built once, ~1-2 min)."""
    if not shutil.which("bwrap"):
        pytest.skip("bubblewrap is not installed (make setup installs it)")
    if os.geteuid() != 0:
        pytest.skip("the bwrap backend mounts overlays and needs root")
    from autoenvscaling.tools.sandbox.rootfs import ensure_base_rootfs

    ensure_base_rootfs()


@pytest.fixture
async def workspace(bwrap_ready):
    from autoenvscaling.tools.sandbox import SandboxLimits
    from autoenvscaling.tools.sandbox.bwrap import start_workspace

    sandbox = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64))
    yield sandbox
    await sandbox.close()
