"""Caps that hold (issue 28, item 7): the writable layer, /logs, and the processes a shared
verifier's kill spares.

Each attack runs as root in a real sandbox on the default engine:
- ptrace (and /proc/<pid>/mem) of the container's init and keep-alive, the two processes the
  end-of-agent kill leaves alive: code planted there would outlive the agent. Defence: they run
  as a uid of their own (container.KEEPER_USER), and no sandbox has CAP_SYS_PTRACE.
- /logs past its size: defence, a size-capped tmpfs (profile.logs_tmpfs).
- 64 MB and 5,000 empty files in a 16 MB layer: defence, the layer on an ext4 of its own size
  and inode count (layerfs.py): ENOSPC at the cap, no window. Where that cannot be made, the
  measured cap (layercap.py) counts bytes and entries, and fallocate (host disk taken before a
  measurement sees it) is refused in sandboxes.
"""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from autoenvscaling.tools.sandbox import SandboxLimits
from autoenvscaling.tools.sandbox.base import SandboxError
from autoenvscaling.tools.sandbox.container import start_workspace
from autoenvscaling.tools.settings import get_settings

from ..conftest import container_running, mounted_on
from .conftest import sandbox_runtime

pytestmark = [pytest.mark.timeout(180)]

TRACE = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
keeper = [p for p in os.listdir("/proc") if p.isdigit()
          and open(f"/proc/{p}/cmdline", "rb").read().startswith(b"/bin/sh\0-c\0while read")]
for pid in sorted({1, *map(int, keeper)}):
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        print(f"{pid}: ATTACHED")
        os.waitpid(pid, 0)
        libc.ptrace(17, pid, 0, 0)  # PTRACE_DETACH
    else:
        print(f"{pid}: attach refused ({os.strerror(ctypes.get_errno())})")
    try:
        os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR))
        print(f"{pid}: MEM WRITABLE")
    except OSError as exc:
        print(f"{pid}: mem refused ({exc.strerror})")
"""


def flood(folder: str, count: int = 5000) -> str:
    """A command making `count` empty files in `folder`; prints the error and how many it made."""
    return (
        f'mkdir -p {folder} && python3 -c "\n'
        "made = 0\n"
        "try:\n"
        f"    for i in range({count}): open(f'{folder}/{{i}}', 'w').close(); made += 1\n"
        "except OSError as exc: print(exc)\n"
        "print('made', made)\n\""
    )


async def test_init_and_keepalive_cannot_be_traced(engine_ready):
    box = await start_workspace(limits=SandboxLimits(memory_mb=256, pids=64))
    try:
        probe = await box.exec(f"python3 - <<'EOF'\n{TRACE}\nEOF", timeout_sec=60)
    finally:
        await box.close()
    out = probe.stdout + probe.stderr
    assert len(re.findall(r"attach refused", out)) >= 2, out  # init and the keep-alive
    assert "ATTACHED" not in out and "MEM WRITABLE" not in out, out


async def test_logs_stop_at_their_cap(engine_ready):
    cap = get_settings().max_download_mb
    box = await start_workspace(limits=SandboxLimits(memory_mb=cap + 256, pids=64, disk_mb=64))
    try:
        mounted = await box.exec("grep ' /logs ' /proc/mounts")
        wrote = await box.exec(
            f"mkdir -p /logs/agent && dd if=/dev/zero of=/logs/agent/flood bs=1M "
            f"count={cap + 64} 2>&1; stat -c %s /logs/agent/flood",
            timeout_sec=120,
        )
    finally:
        await box.close()
    # runc: "tmpfs /logs tmpfs ..."; runsc: "none /logs tmpfs ..." (gVisor's own tmpfs).
    assert mounted.stdout.split()[1:3] == ["/logs", "tmpfs"], f"/logs is {mounted.stdout!r}"
    assert "No space left on device" in wrote.stdout, wrote.stdout
    size = int(wrote.stdout.split()[-1])
    assert size <= cap * 1024 * 1024, f"/logs took {size} bytes past its {cap} MB cap"


async def test_layer_bytes_and_files_stop_at_the_cap_with_no_window(engine_ready):
    """64 MB written and 5,000 files made in a 16 MB layer: each stops at the cap with 'No space
    left on device', the sandbox lives on, and nothing is left mounted once it is removed.
    (A measured cap lets a second of writes through: 64 MB in 16 MB, then kills the sandbox.)

    Under runsc the bytes stop the same (gVisor's overlay of / keeps file data in one file on the
    layer's ext4), but gVisor keeps its files' entries in its own memory: the 5,000 files are made
    and a flood of them ends at the memory limit instead (test_a_file_flood_..._memory_limit's
    runsc case). Written in /var/tmp: under runsc /tmp is a tmpfs of gVisor's, not the layer."""
    runtime = sandbox_runtime()
    from autoenvscaling.tools.sandbox.engine import client
    from autoenvscaling.tools.sandbox.engine_health import cap_loop_devices, cap_mounts
    from autoenvscaling.tools.sandbox.layerfs import upper_dir

    box = await start_workspace(limits=SandboxLimits(memory_mb=512, pids=64, disk_mb=16))
    try:
        layer = upper_dir(client(box.backend).api, box.container_id).parent  # type: ignore[union-attr]
        seen = await box.exec("df -k / | tail -1")
        wrote = await box.exec(
            "dd if=/dev/zero of=/var/tmp/big bs=1M count=64 2>&1; du -k /var/tmp/big",
            timeout_sec=120,
        )
        await box.exec("rm -f /var/tmp/big")
        flooded = await box.exec(flood("/var/tmp/flood"), timeout_sec=120)
        alive = container_running(box)
        mounted = mounted_on(layer)
        linked = [os.readlink(layer / part) for part in ("diff", "work")]
        loops = cap_loop_devices()
    finally:
        await box.close()
    assert box.ref.handle["layer_cap"].startswith("ext4 of 16 MB"), box.ref.handle
    assert box.ref.handle.get("runtime", "runc") == runtime, box.ref.handle
    if runtime == "runc":  # gVisor reports a size of its own for / (8 EiB)
        assert int(seen.stdout.split()[1]) <= 16 * 1024, f"the sandbox sees {seen.stdout!r}"
    assert "No space left on device" in wrote.stdout, wrote.stdout
    assert int(wrote.stdout.split()[-2]) <= 16 * 1024, f"past the cap: {wrote.stdout!r}"
    if runtime == "runc":
        assert "No space left on device" in flooded.stdout, flooded.stdout
        assert int(flooded.stdout.split()[-1]) <= 16 * 1024 * 1024 // 16_384, flooded.stdout
    else:  # the entries are the Sentry's memory: when a runsc caps them here, this fails
        assert flooded.stdout.split()[-2:] == ["made", "5000"], flooded.stdout
    assert alive, "the sandbox was stopped: a full disk should fail the write, not the sandbox"
    # The filesystem is beside the store, not on the layer folder (where podman's bind of its
    # overlay home could hide it), and no mount of ours stays once the container runs: its
    # overlay holds it (layerfs.py).
    assert mounted == [], f"the layer folder {layer} has {mounted} mounted on it"
    assert all("/aes-layers/" in link for link in linked), linked
    assert not any(box.container_id[:12] in m for m in cap_mounts()), cap_mounts()
    assert not mounted_on(layer) and not layer.exists(), f"{layer} left behind after removal"
    for _ in range(50):  # the loop device clears as its last user lets go of it
        if set(loops) - set(cap_loop_devices()):
            break
        await asyncio.sleep(0.1)
    else:
        raise AssertionError(f"no loop device went with the sandbox: {cap_loop_devices()}")


async def test_reservation_refused_and_measured_cap_where_no_filesystem_can_be_made(
    engine_ready, monkeypatch
):
    """Where the layer cannot have a filesystem of its own (a remote engine, not root), the cap
    is measured: 5,000 files in a 16 MB layer stop the sandbox, and fallocate (which would take
    host disk before a measurement sees it) is refused. The refusal is the seccomp profile's,
    which runsc applies to no exec (measured: 6 GiB of host disk reserved before the cap looked),
    so such a sandbox runs under runc whatever the setting (container.py)."""
    from autoenvscaling.tools.sandbox import layerfs

    def no_loop(*_args: object) -> str:
        raise layerfs.NotConfinedError("not root: no loop mount")

    monkeypatch.setattr(layerfs, "confine", no_loop)
    box = await start_workspace(limits=SandboxLimits(memory_mb=512, pids=64, disk_mb=16))
    try:
        reserved = await box.exec("fallocate -l 6G /tmp/reserve 2>&1; du -m /tmp/reserve 2>&1")
        await box.exec("rm -f /tmp/reserve")
        try:  # the cap may stop the container under this very command
            await box.exec(flood("/tmp/flood"), timeout_sec=120)
        except SandboxError:
            pass
        stopped = False
        for _ in range(10):  # the measured cap looks once a second
            await asyncio.sleep(1)
            if not container_running(box):
                stopped = True
                break
    finally:
        try:
            await box.close()
        except SandboxError:
            pass
    assert box.ref.handle["layer_cap"] == "measured (not root: no loop mount)", box.ref.handle
    assert "runtime" not in box.ref.handle, f"a measured cap under {box.ref.handle['runtime']}"
    assert "Operation not supported" in reserved.stdout, (
        f"fallocate reserved 6 GiB of host disk in one call: {reserved.stdout!r}"
    )
    assert stopped, "5,000 files in a 16 MB layer were never stopped"
    assert "files cap" in str(box.ref.handle.get("killed")), box.ref.handle


async def test_a_file_flood_in_logs_is_bounded_by_the_memory_limit(engine_ready):
    """/logs is a tmpfs (podman 4.3 refuses `nr_inodes`): its files are memory-accounted, so a
    flood of empty files there ends at the sandbox's memory limit, not the host's RAM. (The
    sandbox is then full: its next commands are killed too, the agent's own doing.) Under runsc
    /logs is gVisor's tmpfs, in the Sentry's memory, charged to the same limit: a sandbox past it
    ends as a whole (runtimes.py), which is the bound there."""
    from autoenvscaling.tools.sandbox.engine import client

    runtime = sandbox_runtime()
    box = await start_workspace(limits=SandboxLimits(memory_mb=128, pids=64))
    try:
        try:
            flooded = await box.exec(flood("/logs/flood", 3_000_000), timeout_sec=180)
        except SandboxError as exc:  # runsc: the sandbox went with the flood
            flooded, ended = None, str(exc)
        else:
            ended = ""
        if runtime == "runsc":
            for _ in range(80):  # podman notices the Sentry's end a moment later
                if not container_running(box):
                    break
                await asyncio.sleep(0.25)
            running = container_running(box)
            stats = None
        else:
            stats = client(box.backend).api.stats(box.container_id, stream=False)
    finally:
        await box.close()
    if runtime == "runsc":
        assert not running, f"3,000,000 files in /logs and the sandbox lives: {flooded}"
        made = flooded.stdout.split()[-1] if flooded and "made" in flooded.stdout else None
        assert made is None or int(made) < 3_000_000, (flooded, ended)
        return
    assert flooded is not None and stats is not None, ended
    made = flooded.stdout.split()[-1] if "made" in flooded.stdout else None
    assert made is None or int(made) < 3_000_000, flooded  # killed, or stopped with an error
    usage = stats["memory_stats"]["usage"]
    assert 64 * 2**20 < usage <= 128 * 2**20, f"memory in use after the flood: {usage}"
