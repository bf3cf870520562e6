"""Caps that hold (issue 28, item 7): the writable layer, /logs, and the processes a shared
verifier's kill spares.

Each attack runs as root in a real sandbox on the default engine:
- ptrace (and /proc/<pid>/mem) of the container's init and keep-alive, the two processes the
  end-of-agent kill leaves alive: code planted there would outlive the agent. Defence: they run
  as a uid of their own (container.KEEPER_USER), and no sandbox has CAP_SYS_PTRACE.
- /logs past its size: defence, a size-capped tmpfs (profile.logs_tmpfs).
- A 6 GiB fallocate (host disk taken before a measured cap sees it) and 5,000 empty files in
  a 64 MB layer (never stopped by a cap on bytes): defence, fallocate refused in sandboxes and a
  cap on entries beside the one on bytes (layercap.py).
"""

from __future__ import annotations

import asyncio
import re

import pytest

from autoenvscaling.tools.sandbox import SandboxLimits
from autoenvscaling.tools.sandbox.base import SandboxError
from autoenvscaling.tools.sandbox.container import start_workspace
from autoenvscaling.tools.settings import get_settings

from ..conftest import container_running

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
    assert mounted.stdout.startswith("tmpfs /logs "), f"/logs is {mounted.stdout!r}"
    assert "No space left on device" in wrote.stdout, wrote.stdout
    size = int(wrote.stdout.split()[-1])
    assert size <= cap * 1024 * 1024, f"/logs took {size} bytes past its {cap} MB cap"


async def test_layer_reservation_and_file_flood_are_stopped(engine_ready):
    box = await start_workspace(limits=SandboxLimits(memory_mb=512, pids=64, disk_mb=16))
    try:
        reserved = await box.exec("fallocate -l 6G /tmp/reserve 2>&1; du -m /tmp/reserve 2>&1")
        await box.exec("rm -f /tmp/reserve")
        try:  # the cap may stop the container under this very command
            await box.exec(
                'mkdir -p /tmp/flood && python3 -c "\n'
                "for i in range(5000): open(f'/tmp/flood/{i}', 'w').close()\n\"",
                timeout_sec=120,
            )
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
    assert "Operation not supported" in reserved.stdout, (
        f"fallocate reserved 6 GiB of host disk in one call: {reserved.stdout!r}"
    )
    assert stopped, "5,000 files in a 16 MB layer were never stopped"
    assert "files cap" in str(box.ref.handle.get("killed")), box.ref.handle
