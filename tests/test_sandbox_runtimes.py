"""The sandbox's OCI runtimes (tools/sandbox/runtimes.py), on real podman: runc (unchanged) and
runsc (gVisor) where it is installed, and `auto` (the default) choosing between them.

What each runtime must show: which kernel the sandbox sees, and what its limits do. Where runsc
differs from runc the difference is the assertion (runtimes.py states each one).
"""

from __future__ import annotations

import asyncio
import functools
import os

import pytest

from autoenvscaling.tools.sandbox import runtimes
from autoenvscaling.tools.sandbox.base import SandboxLimits
from autoenvscaling.tools.sandbox.bases import require_base
from autoenvscaling.tools.sandbox.container import ContainerSandbox, start_workspace
from autoenvscaling.tools.settings import get_settings

from .conftest import container_running

pytestmark = [pytest.mark.timeout(180)]

NO_RUNSC = not os.access(runtimes.RUNSC, os.X_OK)
needs_runsc = pytest.mark.skipif(
    NO_RUNSC, reason=f"{runtimes.RUNSC} is not installed (`make system` installs runsc)"
)


@functools.cache
def _runsc_broken() -> str | None:
    return runtimes.self_check().broken


def runsc_or_skip() -> None:
    """Skip, saying why, where runsc is installed but cannot start a sandbox (a CI container
    without what gVisor's ptrace platform needs); tests that need it call this first."""
    if why := _runsc_broken():
        pytest.skip(f"runsc cannot run here: {why}")


@pytest.fixture
def use_runtime(monkeypatch):
    """Switch this process's sandbox runtime for one test (settings are cached per process)."""

    def use(name: str) -> None:
        if name == "runsc":
            runsc_or_skip()
        monkeypatch.setenv("AUTOENVSCALING_SANDBOX_RUNTIME", name)
        get_settings.cache_clear()

    yield use
    monkeypatch.delenv("AUTOENVSCALING_SANDBOX_RUNTIME", raising=False)
    get_settings.cache_clear()


def test_auto_is_the_default_and_says_why_it_chose(monkeypatch, engine_ready):
    monkeypatch.delenv("AUTOENVSCALING_SANDBOX_RUNTIME", raising=False)
    get_settings.cache_clear()
    try:
        assert get_settings().sandbox_runtime == "auto"
        chosen = runtimes.choice("podman")
    finally:
        get_settings.cache_clear()
    check = runtimes.self_check()
    if chosen.runtime == "runc":  # not installed, cannot start, or breaks a task's tools
        assert chosen.reason.startswith("auto: "), chosen.reason
        assert check.broken or check.problems, check
    else:
        assert "passed the self-check" in chosen.reason and check == runtimes.SelfCheck()


def test_runc_changes_nothing():
    runc = runtimes.RUNTIMES["runc"]
    # No flags: the engine's one service, as before runtimes existed; limits as given.
    assert runc.service_flags(False) == runc.service_flags(True) == ()
    assert runc.host_pids(512) == 512 and runc.host_processes
    assert runtimes.service_flags("docker", network=True) == ()


def test_runsc_flags_say_which_network_gvisor_uses():
    runsc = runtimes.RUNTIMES["runsc"]
    assert runsc.service_flags(False)[-1] == "network=none"
    assert runsc.service_flags(True)[-1] == "network=host"  # the slirp4netns namespace's stack
    assert "oci-seccomp" in runsc.service_flags(False)  # else runsc ignores profile.py's rules
    assert runsc.host_pids(64) == 64 * runtimes.HOST_PIDS_PER_PROCESS + runtimes.SENTRY_PIDS


def test_an_unknown_runtime_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("AUTOENVSCALING_SANDBOX_RUNTIME", "kata")
    get_settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="sandbox_runtime"):
            get_settings()
    finally:
        monkeypatch.delenv("AUTOENVSCALING_SANDBOX_RUNTIME")
        get_settings.cache_clear()


async def test_runc_sandbox_sees_the_hosts_kernel(engine_ready, use_runtime):
    use_runtime("runc")
    box = await start_workspace()
    try:
        out = await box.exec("uname -r")
        assert out.stdout.strip() == os.uname().release
        assert box.ref.handle["pidns"] and "runtime" not in box.ref.handle
    finally:
        await box.close()


@needs_runsc
async def test_runsc_sandbox_sees_gvisors_kernel(engine_ready, use_runtime):
    use_runtime("runsc")
    box = await start_workspace()
    try:
        out = await box.exec("uname -r")
        assert out.stdout.strip() == runtimes.GVISOR_RELEASE != os.uname().release
        # Its processes are the Sentry's: not findable in our /proc, so none is looked for.
        assert box.ref.handle["runtime"] == "runsc" and box.ref.handle["pidns"] is None
        # /tmp is gVisor's own tmpfs (memory, not the writable layer). / is the host's layer
        # through the gofer (9p) on runsc 0.0~20221219; trixie's runsc wraps it in an overlay of
        # its own whose file data lands in one file in the container's root, on the layer's
        # capped filesystem (tests/security/test_runtimes.py holds the cap).
        mounts = await box.exec("grep -E ' /tmp | / ' /proc/mounts")
        assert "/tmp tmpfs" in mounts.stdout, mounts.stdout
        assert " / overlay " in mounts.stdout or " / 9p " in mounts.stdout, mounts.stdout
        # A timeout still ends the command (killed from inside, through an exec).
        slow = await box.exec("sleep 60", timeout_sec=2)
        assert slow.timed_out
        left = await box.exec("for p in /proc/[0-9]*; do cat $p/cmdline; echo; done")
        assert "sleep60" not in left.stdout.replace("\0", "")
        # The control channel needs a working `stat`: refused where runsc breaks it (0.0~20221219),
        # and every exec then takes the engine's exec API (never a channel that fails each call).
        stat_broken = any("stat" in problem for problem in runtimes.self_check().problems)
        assert await box.open_control() is not stat_broken
        served = await box.exec("echo served")
        assert served.exit_code == 0 and served.stdout.strip() == "served", served
    finally:
        await box.close()


@needs_runsc
async def test_auto_takes_runsc_only_when_its_self_check_finds_nothing_broken(engine_ready):
    runsc_or_skip()
    check = runtimes.self_check()
    chosen = runtimes._choose("auto")
    assert chosen.runtime == ("runc" if check.problems else "runsc"), chosen.reason
    assert runtimes.runsc_version() in chosen.reason
    if check.problems:
        assert "breaks task tools" in chosen.reason
    if runtimes.runsc_version() < "0.0~20240729":
        # bookworm's runsc 0.0~20221219: statx with AT_NO_AUTOMOUNT is EINVAL, `ls` fails.
        assert any("Invalid argument" in problem for problem in check.problems), check
    elif runtimes.runsc_version() == "0.0~20240729.0":
        # trixie's, which `make system` installs (tools/sandbox/install-runsc.sh): `ls` and
        # `stat` work, but tmux clients run the sandbox out of memory (the test below), so `auto`
        # keeps runc. When a runsc stops keeping memory per tmux client, auto takes it.
        assert check.problems == (runtimes.TMUX_PROBLEM,), check
        assert chosen.runtime == "runc", chosen.reason


def test_a_passing_self_check_is_kept_per_runsc_binary(monkeypatch, tmp_path):
    """Each process under `auto` asks once; the machine runs the container once per binary."""
    if NO_RUNSC:
        pytest.skip(f"{runtimes.RUNSC} is not installed")
    monkeypatch.setenv("AUTOENVSCALING_CACHE_DIR", str(tmp_path))
    get_settings.cache_clear()
    ran: list[str] = []

    def check_now(image=None):
        ran.append(image or "")
        return runtimes.SelfCheck(problems=("one",)) if image else runtimes.SelfCheck()

    monkeypatch.setattr(runtimes, "check_now", check_now)
    try:
        assert runtimes.self_check() == runtimes.SelfCheck()
        assert runtimes.self_check() == runtimes.SelfCheck() and ran == [""]
        assert (tmp_path / "runsc-self-check.json").is_file()
        # Another image (or another runsc binary) is another key: checked again.
        assert runtimes.self_check("other").problems == ("one",) and ran == ["", "other"]
        # A start that failed is never kept.
        monkeypatch.setattr(
            runtimes, "check_now", lambda image=None: runtimes.SelfCheck(broken="engine down")
        )
        (tmp_path / "runsc-self-check.json").unlink()
        assert runtimes.self_check().broken == "engine down"
        assert not (tmp_path / "runsc-self-check.json").exists()
    finally:
        get_settings.cache_clear()


async def output_or_end(box, command: str, timeout_sec: float) -> str:
    """What `command` printed, or, where the sandbox went with it (runsc past its memory), why
    the exec failed."""
    try:
        out = await box.exec(command, timeout_sec=timeout_sec, cwd="/")
    except Exception as exc:  # noqa: BLE001 - the sandbox went with it (runsc)
        return str(exc)
    return out.stdout + out.stderr


async def ended(box, within_sec: float = 20.0) -> bool:
    """Whether the sandbox's container stops within `within_sec` (podman notices a dead Sentry
    a moment after the exec that saw it die)."""
    for _ in range(int(within_sec * 4)):
        if not container_running(box):
            return True
        await asyncio.sleep(0.25)
    return False


@needs_runsc
async def test_runsc_files_and_the_verifiers_kill_go_through_runsc(
    engine_ready, use_runtime, tmp_path
):
    """podman's copier cannot reach gVisor's root: files go through `tar` in an exec; the
    agent's leftovers are listed and killed by runsc from the host (gvisor_procs.py)."""
    from autoenvscaling.tools.sandbox.gvisor_procs import kill_agent_processes, processes

    use_runtime("runsc")
    (tmp_path / "up").mkdir()
    (tmp_path / "up" / "a.txt").write_text("uploaded\n")
    box = await start_workspace()
    try:
        await box.upload(tmp_path / "up", "/solution")
        read = await box.exec("cat /solution/a.txt")
        assert read.stdout == "uploaded\n", read
        await box.exec("mkdir -p /logs/v && echo 1.0 > /logs/v/reward.txt")
        assert await box.download("/logs/v", tmp_path / "down") == []
        assert (tmp_path / "down" / "reward.txt").read_text() == "1.0\n"
        # An agent's leftovers: a background writer, detached from the exec that started it.
        await box.exec("(setsid sleep 300 &) ; (sleep 300 &) ; true")
        before = processes(box.container_id)
        assert len(before) >= 4, before  # init, keep-alive, two sleeps
        assert kill_agent_processes(box.container_id) >= 2
        assert sorted(pid for pid, _ in processes(box.container_id)) == [1, 2]
        assert (await box.exec("echo alive")).stdout.strip() == "alive"
    finally:
        await box.close()


MEMORY_HOG = "python3 -c 'x = bytearray(400 * 1024 * 1024); print(len(x))'; echo rc=$?"


@pytest.mark.parametrize("name", ["runc", pytest.param("runsc", marks=needs_runsc)])
async def test_memory_limit_holds(engine_ready, use_runtime, name):
    """400 MB in a 192 MB sandbox. runc: the process is OOM-killed, the sandbox lives. runsc:
    the Sentry is charged for the guest's memory, so the whole sandbox ends (the host is
    untouched either way)."""
    use_runtime(name)
    image = require_base("podman")
    box = await ContainerSandbox.start(image, limits=SandboxLimits(memory_mb=192))
    try:
        text = await output_or_end(box, MEMORY_HOG, 60)
        assert str(400 * 1024 * 1024) not in text
        if name == "runc":
            assert "rc=137" in text and container_running(box)
        else:
            assert await ended(box), text
    finally:
        await box.close()


@pytest.mark.parametrize("name", ["runc", pytest.param("runsc", marks=needs_runsc)])
async def test_pids_limit_holds(engine_ready, use_runtime, name):
    """40 processes fit in a 64-process sandbox on both; 400 do not. runc: fork fails and the
    sandbox lives. runsc: the host limit is scaled for the Sentry's threads, and reaching it
    ends the sandbox."""
    use_runtime(name)
    box = await start_workspace(limits=SandboxLimits(pids=64))
    try:
        fits = await box.exec("for i in $(seq 40); do sleep 30 & done; echo started", cwd="/")
        assert "started" in fits.stdout, fits
        await box.exec("kill $(jobs -p) 2>/dev/null; pkill sleep; true", cwd="/")
        try:
            bomb = await box.exec(
                "n=0; for i in $(seq 400); do sleep 30 2>/dev/null & n=$i; done; echo n=$n",
                timeout_sec=60,
                cwd="/",
            )
            text = bomb.stdout + bomb.stderr
        except Exception as exc:  # noqa: BLE001 - the sandbox went with it (runsc)
            text = str(exc)
        if name == "runc":
            assert container_running(box) and "fork" in text.lower(), text
        else:
            assert await ended(box), text
    finally:
        await box.close()


#: A tmux server and 40 tmux clients (the offline base image has tmux): each client closes
#: descriptor 0x7fffffff.
TMUX_CLIENTS = (
    "tmux new-session -d -s t 'sleep 300' && "
    "for i in $(seq 40); do tmux ls >/dev/null || break; done; echo done"
)


@pytest.mark.parametrize("name", ["runc", pytest.param("runsc", marks=needs_runsc)])
async def test_runsc_keeps_memory_for_every_tmux_client(engine_ready, use_runtime, name):
    """runsc 0.0~20240729 grows a process's descriptor table to the number it closes (its heap
    profile: `FDTable.set` under `close`), and for a tmux client, which closes 0x7fffffff, keeps
    ~33 MB that is never given back: 40 clients end a 256 MB sandbox, which runc does not notice.
    Why tasks/seed/tmux-editor-settings fails under runsc. When a runsc stops keeping it, this
    fails: that task then joins test_gate_seed_runsc.py's TASKS."""
    use_runtime(name)
    box = await start_workspace(limits=SandboxLimits(memory_mb=256))
    try:
        text = await output_or_end(box, TMUX_CLIENTS, 120)
        if name == "runc":
            assert "done" in text and container_running(box), text
        else:
            assert await ended(box), text
    finally:
        await box.close()
