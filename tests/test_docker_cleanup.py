"""Containers never outlive the trial that made them, even when it is killed; nothing else is touched.

Who cleans: `close()` (Harbor's `stop()`) on a normal end; the engine itself when the owning
process dies (the container's main process ends with its owner's attach socket, `auto_remove`
deletes it); `cleanup_stale()` (at the first docker trial of each process, and from
`doctor --clean`) for containers whose owner is gone without that tie.
"""
# ruff: noqa: F811  (pytest fixtures imported from test_docker_fixtures)

import asyncio
import os
import signal
import subprocess
import sys
import time

import pytest

from autoenvscaling.tools.sandbox.docker import (
    LABEL,
    OWNER_LABEL,
    base_image_tag,
    cleanup_stale,
)

from .conftest import FIXTURES
from .test_docker_fixtures import docker_engine  # noqa: F401

pytestmark = pytest.mark.docker

SCRIPT_AGENT = "autoenvscaling.tools.script_agent:ScriptAgent"


def owned_by(api, pid: int) -> list[dict]:
    return [
        c
        for c in api.containers(all=True, filters={"label": f"{LABEL}=1"})
        if f":{pid}:" in c["Labels"].get(OWNER_LABEL, "")
    ]


async def wait_for(predicate, what: str, limit: float = 90):
    """Poll until `predicate()` is truthy; a deadline only so a broken run cannot hang CI."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if value := await asyncio.to_thread(predicate):
            return value
        await asyncio.sleep(0.2)
    raise AssertionError(f"never happened: {what}")


async def test_trial_killed_during_the_agent_phase_leaves_no_container(docker_engine, tmp_path):
    api = docker_engine.api
    code = (
        "import asyncio, sys\nfrom pathlib import Path\n"
        "from autoenvscaling.tools.trials import run_trial\n"
        "asyncio.run(run_trial(Path(sys.argv[1]), agent=sys.argv[2], backend='docker',\n"
        "    trials_dir=Path(sys.argv[3]), agent_kwargs={'commands': ['sleep 600']}))\n"
    )
    child = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block
        [sys.executable, "-c", code, str(FIXTURES / "good_task"), SCRIPT_AGENT, str(tmp_path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def agent_running():
            for container in owned_by(api, child.pid):
                top = api.top(container["Id"])
                if any("sleep 600" in " ".join(p) for p in top["Processes"]):
                    return container["Id"]
            return None

        container_id = await wait_for(agent_running, "the agent phase starts")
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
        await wait_for(lambda: owned_by(api, child.pid) == [], "the container is removed")
        assert api.containers(all=True, filters={"id": container_id}) == []
    finally:
        if child.poll() is None:
            child.kill()


async def test_cleanup_removes_only_stale_labelled_containers(docker_engine):
    api = docker_engine.api
    # An untied container whose owner process has exited: stale.
    code = (
        "import asyncio\nfrom autoenvscaling.tools.sandbox.docker import DockerSandbox\n"
        "async def main():\n"
        f"    box = await DockerSandbox.start({base_image_tag()!r}, tie_to_owner=False)\n"
        "    print(box.container_id)\n"
        "asyncio.run(main())\n"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    orphan = done.stdout.strip()
    # Someone else's running container (no label) and one of ours whose owner is alive.
    foreign = api.create_container(
        base_image_tag(),
        ["sleep", "infinity"],
        host_config=api.create_host_config(network_mode="none"),
    )["Id"]
    api.start(foreign)
    from autoenvscaling.tools.sandbox.docker import DockerSandbox

    live = await DockerSandbox.start(base_image_tag())
    try:
        assert [c["Id"] for c in api.containers(filters={"id": orphan})] == [orphan]
        name = api.inspect_container(orphan)["Name"].lstrip("/")
        report = cleanup_stale()
        assert name in report.containers and live.ref.id not in report.containers
        assert api.containers(all=True, filters={"id": orphan}) == []
        assert api.inspect_container(foreign)["State"]["Running"]
        assert (await live.exec("true")).exit_code == 0
    finally:
        api.remove_container(foreign, force=True)
        await live.close()


async def test_a_normal_trial_end_removes_its_container(docker_engine, tmp_path):
    from autoenvscaling.tools.trials import run_trial

    outcome = await run_trial(
        FIXTURES / "good_task", agent="nop", backend="docker", trials_dir=tmp_path
    )
    assert outcome.error is None
    assert owned_by(docker_engine.api, os.getpid()) == []
