"""Containers never outlive the trial that made them, even when it is killed; nothing else is touched.

Who cleans: `close()` (Harbor's `stop()`) on a normal end; the engine itself when the owning
process dies (the container's main process ends with its owner's attach socket, `auto_remove`
deletes it); `cleanup_stale()` (at each process's first sandbox start, and from
`doctor --clean`) for containers whose owner is gone without that tie.
"""

import asyncio
import os
import signal
import subprocess
import sys
import time

import docker
import pytest
import requests

from autoenvscaling.tools.sandbox.bases import base_image_tag
from autoenvscaling.tools.sandbox.cleanup import LABEL, OWNER_LABEL, cleanup_stale
from autoenvscaling.tools.sandbox.layerfs import upper_dir

from .conftest import FIXTURES, mounted_on

SCRIPT_AGENT = "autoenvscaling.tools.trials.script_agent:ScriptAgent"


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


@pytest.mark.timeout(240)
async def test_trial_killed_during_the_agent_phase_leaves_no_container(
    engine, engine_client, tmp_path
):
    api = engine_client.api
    code = (
        "import asyncio, sys\nfrom pathlib import Path\n"
        "from autoenvscaling.tools.trials.trial import run_trial\n"
        "asyncio.run(run_trial(Path(sys.argv[1]), agent=sys.argv[2], backend=sys.argv[4],\n"
        "    trials_dir=Path(sys.argv[3]), agent_kwargs={'commands': ['sleep 600']}))\n"
    )
    child = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block
        [
            sys.executable,
            "-c",
            code,
            str(FIXTURES / "good_task"),
            SCRIPT_AGENT,
            str(tmp_path),
            engine,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:

        def agent_running():
            for container in owned_by(api, child.pid):
                if container["State"] != "running":
                    continue
                try:
                    top = api.top(container["Id"])
                # A container between states: podman can answer `top` with an empty body, or
                # with an error once it has stopped (seen in CI). Not yet the agent phase.
                except (docker.errors.APIError, requests.exceptions.JSONDecodeError):
                    continue
                if any("sleep 600" in " ".join(p) for p in top.get("Processes") or []):
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


@pytest.mark.timeout(240)
async def test_cleanup_removes_only_stale_labelled_containers(engine, engine_client):
    api = engine_client.api
    # An untied container whose owner process has exited: stale.
    code = (
        "import asyncio\nfrom autoenvscaling.tools.sandbox.container import ContainerSandbox\n"
        "async def main():\n"
        f"    box = await ContainerSandbox.start({base_image_tag()!r}, backend={engine!r},\n"
        "        tie_to_owner=False)\n"
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
    # Untied, so it outlives its owner until a sweep.
    assert [c["Id"] for c in api.containers(filters={"id": orphan})] == [orphan]
    name = api.inspect_container(orphan)["Name"].lstrip("/")
    # Someone else's running container (no label) and one of ours whose owner is alive.
    foreign = api.create_container(
        base_image_tag(),
        ["sleep", "infinity"],
        host_config=api.create_host_config(network_mode="none"),
    )["Id"]
    api.start(foreign)
    from autoenvscaling.tools.sandbox.container import ContainerSandbox

    # (This process's first start may already sweep the orphan: that is the point.)
    live = await ContainerSandbox.start(base_image_tag(), backend=engine)
    try:
        report = cleanup_stale(api)
        assert live.ref.id not in report.containers
        assert api.containers(all=True, filters={"id": orphan}) == []
        assert api.inspect_container(foreign)["State"]["Running"]
        assert (await live.exec("true")).exit_code == 0
        assert name not in {c["Names"][0].lstrip("/") for c in api.containers(all=True)}
    finally:
        api.remove_container(foreign, force=True)
        await live.close()


async def test_a_normal_trial_end_removes_its_container(engine, engine_client, tmp_path):
    from autoenvscaling.tools.trials.trial import run_trial

    outcome = await run_trial(
        FIXTURES / "good_task", agent="nop", backend=engine, trials_dir=tmp_path
    )
    assert outcome.error is None
    assert owned_by(engine_client.api, os.getpid()) == []


@pytest.mark.timeout(240)
async def test_kill_9_of_a_sandbox_holder_leaves_nothing_after_the_next_start(
    engine, engine_client, tmp_path
):
    """A process holding a tied sandbox, an untied one, scratch and (podman) its own API service
    is SIGKILLed; the next process to start a sandbox sweeps what the engine did not remove."""
    api = engine_client.api
    holder = (
        "import asyncio, os, sys\n"
        "from autoenvscaling.tools.sandbox.container import ContainerSandbox, start_workspace\n"
        "from autoenvscaling.tools.sandbox.cleanup import scratch_dir\n"
        "from autoenvscaling.tools.sandbox.podman_service import _SERVICE\n"
        "async def main():\n"
        "    tied = await start_workspace(backend=sys.argv[1])\n"
        "    await tied.exec('sleep 1000 &')\n"
        "    untied = await ContainerSandbox.start(sys.argv[2], backend=sys.argv[1],\n"
        "        tie_to_owner=False)\n"
        "    scratch = scratch_dir('test')\n"
        "    service = _SERVICE.proc.pid if _SERVICE.proc else 0\n"
        "    print(untied.container_id, scratch, service, _SERVICE.folder, flush=True)\n"
        "    await asyncio.sleep(1000)\n"
        "asyncio.run(main())\n"
    )
    child = subprocess.Popen(  # noqa: ASYNC220 - starting it does not block
        [sys.executable, "-c", holder, engine, base_image_tag()],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        untied, scratch, service, service_folder = (
            await asyncio.to_thread(child.stdout.readline)
        ).split()
        held = owned_by(api, child.pid)
        assert len(held) == 2
        # Each writable layer is on a loop filesystem of its own, linked from its folder
        # (layerfs.py: beside the store, where no engine bind hides it).
        layers = [upper_dir(api, c["Id"]).parent for c in held]  # type: ignore[union-attr]
        assert all((layer / "diff").is_symlink() for layer in layers), layers
        os.kill(child.pid, signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    # The next start (a fresh process: its first sandbox sweeps) leaves nothing of the dead one.
    nxt = (
        "import asyncio, sys\n"
        "from autoenvscaling.tools.sandbox.container import start_workspace\n"
        "async def main():\n"
        "    box = await start_workspace(backend=sys.argv[1])\n"
        "    await box.close()\n"
        "asyncio.run(main())\n"
    )
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-c", nxt, engine], check=True, timeout=120
    )
    await wait_for(lambda: owned_by(api, child.pid) == [], "the dead owner's containers go", 60)
    assert api.containers(all=True, filters={"id": untied}) == []
    assert not os.path.exists(scratch)
    assert not any(mounted_on(layer) or layer.exists() for layer in layers), layers
    if engine == "podman":  # its API service died with it (PR_SET_PDEATHSIG), its folder went
        assert not os.path.exists(service_folder), service_folder
        stat = f"/proc/{service}/stat"
        await wait_for(
            lambda: not os.path.exists(stat) or ") Z " in open(stat).read(),
            "the podman service exits",
            30,
        )


def test_gc_lists_again_when_an_image_goes_while_it_lists():
    """podman fails a whole image listing when another process removes an image meanwhile (seen
    in the default tier): the collector lists again instead of failing."""
    import docker.errors

    from autoenvscaling.tools.sandbox.image_gc import list_images

    class Listing:
        calls = 0

        def images(self, filters=None):
            Listing.calls += 1
            if Listing.calls == 1:
                raise docker.errors.APIError('reading image "21e4": image not known')
            return [{"Id": "sha256:1"}]

    assert list_images(Listing()) == [{"Id": "sha256:1"}] and Listing.calls == 2
