"""An engine that never wedges (issue 38): the layer cap cannot be hidden by podman's own bind of
its overlay home, and an engine that stops answering is an infrastructure error with its state.

Real podman, real mounts, real locks. The race runs in a private mount namespace so that podman's
binds and our unbinding of them touch no one else's view of the store; the lock tests hold a real
storage lock (fcntl, as podman takes it) for a few seconds, so they run in the serial tier: held
while the parallel tier runs, that lock stalls every other worker's sandboxes, and their queued
podman processes (holding other storage locks, answering slowly after the release) made the
state the test reads depend on what else ran (a CI failure).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import engine, engine_health
from autoenvscaling.tools.trials.faults import classify

LAYERS_LOCK = engine_health.STORAGE_ROOT / "overlay-layers" / "layers.lock"

# The old race, forced: the home's bind is away when the cap is made (a podman process exited
# with no layer mounted), then another podman process starts (it binds the home again, over
# whatever was mounted on a layer folder) and one more starts and exits, all before the sandbox
# starts and is removed. With the cap mounted on the layer folder this left the mount hidden and
# the layer incomplete; now nothing may be hidden, incomplete or left mounted.
RACE = r"""
import asyncio, json, os, subprocess, sys, time
from pathlib import Path
from autoenvscaling.tools.sandbox import engine_health, layerfs
from autoenvscaling.tools.sandbox.base import SandboxLimits
from autoenvscaling.tools.sandbox.cleanup import owner
from autoenvscaling.tools.sandbox.container import start_workspace
from autoenvscaling.tools.sandbox.engine import PODMAN, podman_env

home = str(engine_health.OVERLAY_HOME)
seen, others = {}, []
confine = layerfs.confine

def racing_confine(api, container_id, disk_mb):
    while engine_health.is_mountpoint(home):
        layerfs._detach(Path(home))
    seen["bind_before"] = engine_health.is_mountpoint(home)
    made = confine(api, container_id, disk_mb)
    sock = Path(sys.argv[1]) / "other.sock"
    others.append(subprocess.Popen([PODMAN, "system", "service", "--time=0", f"unix://{sock}"],
                                   env=podman_env(), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL))
    deadline = time.monotonic() + 30
    while not engine_health.is_mountpoint(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    seen["bind_after"] = engine_health.is_mountpoint(home)
    subprocess.run([PODMAN, "ps", "-a"], env=podman_env(), capture_output=True, timeout=60)
    seen["hidden_before_start"] = [m.mountpoint for m in engine_health.hidden_mounts()]
    return made

layerfs.confine = racing_confine

async def main():
    box = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64, disk_mb=16))
    try:
        seen["layer_cap"] = box.ref.handle["layer_cap"]
        seen["df"] = (await box.exec("df -k / | tail -1")).stdout
        seen["wrote"] = (await box.exec(
            "dd if=/dev/zero of=/tmp/big bs=1M count=32 2>&1", timeout_sec=60)).stdout
        seen["hidden_running"] = [m.mountpoint for m in engine_health.hidden_mounts()]
        seen["cid"] = box.container_id
    finally:
        await box.close()
    for proc in others:
        proc.terminate()
        proc.wait(30)
    me = owner()
    seen["incomplete"] = engine_health.incomplete_layers()
    seen["hidden_after"] = [m.mountpoint for m in engine_health.hidden_mounts()]
    seen["our_mounts_after"] = [p for p in engine_health.cap_mounts() if me in p]
    seen["our_loops_after"] = [
        d for d in Path("/sys/block").glob("loop*/loop/backing_file") if me in d.read_text()
    ]
    seen["our_loops_after"] = [str(p) for p in seen["our_loops_after"]]

asyncio.run(main())
print(json.dumps(seen))
"""


@contextmanager
def storage_lock_held() -> Iterator[None]:
    """Hold podman's layer-store lock as a stuck podman process would (a real fcntl lock)."""
    with open(LAYERS_LOCK, "r+") as handle:
        fcntl.lockf(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.lockf(handle, fcntl.LOCK_UN)


@pytest.mark.timeout(300)
def test_cap_mount_cannot_be_hidden_by_podman_binding_its_home(engine_ready, tmp_path):
    done = subprocess.run(
        ["/usr/bin/unshare", "--mount", "--propagation", "private", sys.executable, "-c", RACE,
         str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    # The race was really run: no bind when the cap was made, a fresh one over the home after.
    assert seen["bind_before"] is False and seen["bind_after"] is True, seen
    assert seen["layer_cap"].startswith("ext4 of 16 MB"), seen
    assert seen["hidden_before_start"] == [] and seen["hidden_running"] == [], seen
    # The cap held: the sandbox sees its own 16 MB and a 32 MB write stops at it.
    assert int(seen["df"].split()[1]) <= 16 * 1024, seen["df"]
    assert "No space left on device" in seen["wrote"], seen["wrote"]
    # And the removal left nothing: no incomplete layer, no hidden mount, no mount or loop.
    assert seen["incomplete"] == [], seen
    assert seen["hidden_after"] == [], seen
    assert seen["our_mounts_after"] == [] and seen["our_loops_after"] == [], seen


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.timeout(120)
async def test_an_engine_call_that_does_not_answer_is_infrastructure_with_the_state(
    engine_ready, monkeypatch
):
    monkeypatch.setattr(engine, "ENGINE_CALL_SEC", 3.0)
    monkeypatch.setattr(engine, "_CLIENTS", {})
    api = engine.client("podman").api  # made (and pinged) before the engine stops answering
    with storage_lock_held(), pytest.raises(engine.EngineWedgedError) as caught:
        await engine.call(api.images)
    message = str(caught.value)
    assert "did not answer images within 3 s" in message, message
    assert f"WRITE {LAYERS_LOCK} held by {os.getpid()}" in message, message
    assert "incomplete layers: " in message and "hidden mounts: " in message, message
    assert str(os.getpid()) in message.split("to recover (as root): kill ")[1].split(" && ")[0]
    assert classify(type(caught.value).__name__, message).fault == "infrastructure"
    # It answers again, within the real bound: the queued listing finishes after the release,
    # and on a loaded machine with many images that alone has taken over 3 s (a CI failure).
    monkeypatch.setattr(engine, "ENGINE_CALL_SEC", 60.0)
    monkeypatch.setattr(engine, "_CLIENTS", {})
    assert await engine.call(engine.client("podman").api.images) is not None


@pytest.mark.slow
@pytest.mark.serial
@pytest.mark.timeout(120)
async def test_doctor_says_the_engine_is_wedged_and_how_to_recover(engine_ready, monkeypatch):
    from autoenvscaling.tools.sandbox import doctor

    monkeypatch.setattr(doctor, "ENGINE_ANSWER_SEC", 3.0)
    with storage_lock_held():
        statuses = {s.name: s for s in await doctor.diagnose(start=False)}
    health = statuses["engine health (podman)"]
    assert not health.ok and health.detail.startswith("WEDGED"), health.detail
    assert f"held by {os.getpid()}" in health.detail, health.detail
    kill = next(line for line in health.detail.splitlines() if line.startswith("  kill "))
    assert str(os.getpid()) in kill.split("#")[0].split(), health.detail
    assert "not checked: podman's storage is wedged" in statuses["podman"].detail
    healthy = await __import__("asyncio").to_thread(doctor.check_engine_health)
    assert healthy.ok, healthy.detail


def test_hidden_mounts_name_what_covers_them(tmp_path):
    """A mount its own path no longer reaches is found and named with what covers it (the
    reading behind the watchdog and doctor; a private namespace, nothing shared touched)."""
    script = (
        "import json, subprocess, sys\n"
        "from pathlib import Path\n"
        "from autoenvscaling.tools.sandbox import engine_health\n"
        "root = Path(sys.argv[1]); inner = root / 'layer'; inner.mkdir()\n"
        "run = lambda *a: subprocess.run(a, check=True)\n"
        "run('mount', '-t', 'tmpfs', 'aes-hidden', str(inner))\n"
        "run('mount', '--bind', str(root), str(root))\n"
        "print(json.dumps([m.model_dump() for m in engine_health.hidden_mounts(root)]))\n"
    )
    if os.geteuid() != 0:
        pytest.skip("needs root for mounts")
    done = subprocess.run(
        ["/usr/bin/unshare", "--mount", "--propagation", "private", sys.executable, "-c", script,
         str(tmp_path)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    hidden = json.loads(done.stdout)
    assert [(h["mountpoint"], h["covered_by"]) for h in hidden] == [
        (str(tmp_path / "layer"), str(tmp_path))
    ], hidden
    assert Path(tmp_path / "layer").exists()


@pytest.mark.timeout(120)
def test_a_build_past_its_deadline_is_the_engines_fault_only_when_the_engine_is_wedged(
    engine_ready, monkeypatch, tmp_path
):
    """A CLI call of ours that runs past its deadline: with podman wedged it is
    EngineWedgedError (infrastructure), not the task's BuildError; with podman healthy, a slow
    build stays the task's."""
    import functools
    import time

    from autoenvscaling.tools.sandbox import builders
    from autoenvscaling.tools.sandbox.base import BuildError

    monkeypatch.setattr(builders, "wedge_now", functools.partial(engine.wedge_now, bound=3.0))
    argv, env = engine.cli_argv("podman")
    with storage_lock_held(), pytest.raises(engine.EngineWedgedError) as caught:
        builders._run_build([*argv, "images"], env, tmp_path, time.monotonic() + 2, "t", 2)
    assert f"held by {os.getpid()}" in str(caught.value), caught.value
    with pytest.raises(BuildError, match="timed out"):
        builders._run_build(["/bin/sleep", "30"], env, tmp_path, time.monotonic() + 1, "t", 1)
