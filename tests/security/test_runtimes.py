"""A subset of the red-team suite on each OCI runtime (tools/sandbox/runtimes.py): runc, and
runsc (gVisor) where it is installed. Each attack runs as root in a real sandbox on podman.

- ptrace / /proc/<pid>/mem of the container's init and keep-alive (test_caps.py's attack);
- the writable layer past its cap (test_caps.py's attack: the ext4 under the layer);
- /logs past its size (the tmpfs's size);
- setuid files written into a bound host folder (test_bound_folder.py's attack; such a sandbox
  runs under runc on either setting: runsc's seccomp does not reach execs);
- the host's kernel keyring (a key planted from the sandbox must not reach the host's);
- the host's loopback from a sandbox granted the internet (slirp4netns; under runsc the
  Sentry's sockets are host sockets inside slirp's namespace: `network=host` in that namespace).
"""

from __future__ import annotations

import http.server
import os
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import runtimes
from autoenvscaling.tools.sandbox.base import SandboxLimits
from autoenvscaling.tools.sandbox.container import start_workspace
from autoenvscaling.tools.settings import get_settings

from ..test_sandbox_network import PROBE
from ..test_sandbox_runtimes import runsc_or_skip
from . import test_bound_folder as bound
from . import test_caps as caps

pytestmark = [pytest.mark.timeout(240)]


@pytest.fixture(
    params=[
        "runc",
        pytest.param(
            "runsc",
            marks=pytest.mark.skipif(
                not os.access(runtimes.RUNSC, os.X_OK),
                reason=f"{runtimes.RUNSC} is not installed (`make system` installs runsc)",
            ),
        ),
    ]
)
def runtime(request, monkeypatch) -> str:
    """Each runtime in turn, as this process's sandbox runtime (settings are cached)."""
    if request.param == "runsc":
        runsc_or_skip()
    monkeypatch.setenv("AUTOENVSCALING_SANDBOX_RUNTIME", request.param)
    get_settings.cache_clear()
    request.addfinalizer(get_settings.cache_clear)
    return request.param


@pytest.fixture
def loopback_port() -> Iterator[int]:
    """A server on the host's 127.0.0.1 (what no sandbox may reach)."""
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


async def started_under(runtime: str, **kwargs):
    box = await start_workspace(**kwargs)
    assert box.ref.handle.get("runtime", "runc") == runtime, box.ref.handle
    return box


async def test_init_and_keepalive_cannot_be_traced(engine_ready, runtime):
    await caps.test_init_and_keepalive_cannot_be_traced(engine_ready)


async def test_bound_folder_carries_no_privilege(engine_ready, runtime, tmp_path: Path):
    """test_bound_folder.py's attack under each setting. runsc applies the seccomp profile that
    refuses setuid/setgid modes to the container's first process only, not to execs (measured:
    setuid-root bash reached the host folder through the gofer), so a sandbox with a bound folder
    runs under runc whatever the setting (runtimes.for_sandbox)."""
    assert runtimes.for_sandbox("podman", bound=True).name == "runc"
    await bound.test_bound_folder_carries_no_privilege(engine_ready, tmp_path)


async def test_runsc_ignores_the_seccomp_profile_in_execs(engine_ready, runtime):
    """Why a bound folder never gets runsc: the profile's fallocate refusal holds under runc and
    not in a runsc exec. When a runsc holds it, this fails: bound folders may then use runsc."""
    box = await started_under(runtime)
    try:
        out = await box.exec("fallocate -l 1M /var/tmp/reserve 2>&1 && echo RESERVED")
    finally:
        await box.close()
    assert ("RESERVED" in out.stdout) == (runtime == "runsc"), out.stdout


async def test_layer_stops_at_its_cap(engine_ready, runtime):
    """64 MB into a 16 MB layer: ENOSPC at the cap, the sandbox lives. Under runsc the layer is
    still the host's overlay on its own ext4: the Sentry's gofer writes it. (/var/tmp, not
    /tmp: runsc mounts a tmpfs of its own on /tmp, bounded by the memory limit instead.)"""
    box = await started_under(runtime, limits=SandboxLimits(memory_mb=512, pids=64, disk_mb=16))
    try:
        wrote = await box.exec(
            "dd if=/dev/zero of=/var/tmp/big bs=1M count=64 2>&1; "
            "python3 -c 'import os; print(os.path.getsize(\"/var/tmp/big\"))'",
            timeout_sec=120,
        )
        alive = await box.exec("echo alive")
    finally:
        await box.close()
    assert box.ref.handle["layer_cap"].startswith("ext4 of 16 MB"), box.ref.handle
    assert "No space left on device" in wrote.stdout, wrote.stdout
    assert int(wrote.stdout.split()[-1]) <= 16 * 2**20, wrote.stdout
    assert alive.stdout.strip() == "alive"


async def test_logs_stop_at_their_size(engine_ready, runtime):
    cap = get_settings().max_download_mb
    box = await started_under(runtime, limits=SandboxLimits(memory_mb=cap + 256, pids=64))
    try:
        wrote = await box.exec(
            f"dd if=/dev/zero of=/logs/flood bs=1M count={cap + 64} 2>&1; "
            "python3 -c 'import os; print(os.path.getsize(\"/logs/flood\"))'",
            timeout_sec=120,
        )
    finally:
        await box.close()
    assert "No space left on device" in wrote.stdout, wrote.stdout
    assert int(wrote.stdout.split()[-1]) <= cap * 2**20, wrote.stdout


async def test_limits_are_clamped_on_the_host(engine_ready, runtime):
    """A sandbox asking for 64 CPUs and 1 TB gets at most the settings' caps and the host's
    CPUs, read from the engine (the host's view: under runsc the cgroup files inside are
    gVisor's and show no limit)."""
    from autoenvscaling.tools.sandbox.engine import client

    settings = get_settings()
    box = await started_under(runtime, limits=SandboxLimits(memory_mb=1024 * 1024, cpus=64))
    try:
        host = client(box.backend).api.inspect_container(box.container_id)["HostConfig"]
        seen = await box.exec("awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo")
    finally:
        await box.close()
    assert 0 < host["Memory"] <= settings.max_memory_mb * 2**20, host["Memory"]
    assert 0 < host["NanoCpus"] <= (os.cpu_count() or 1) * 10**9, host["NanoCpus"]
    if runtime == "runsc":  # what the Sentry tells the sandbox is the container's limit
        assert int(seen.stdout) == host["Memory"], seen.stdout


KEYRING = """python3 - <<'EOF'
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
for ring, name in ((-4, "user"), (-5, "user-session"), (-3, "session")):
    r = libc.syscall(248, b"user", b"{key}", b"s3cret", 6, ring)  # add_key
    print("add_key", name, r, os.strerror(ctypes.get_errno()))
EOF"""


async def test_kernel_keyring_is_not_reachable(engine_ready, runtime):
    key = f"aes-runtime-{uuid.uuid4().hex[:8]}"
    box = await started_under(runtime)
    try:
        out = await box.exec(KEYRING.replace("{key}", key))
    finally:
        await box.close()
    lines = [line for line in out.stdout.splitlines() if line.startswith("add_key")]
    assert len(lines) == 3, out
    assert all(line.split()[2] == "-1" for line in lines), out.stdout
    assert key not in Path("/proc/keys").read_text()


async def test_a_granted_sandbox_never_reaches_the_hosts_loopback(
    engine_ready, runtime, loopback_port
):
    box = await started_under(runtime, network=True)
    try:
        devices = await box.exec("cat /proc/net/dev")
        probe = await box.exec(PROBE.format(port=loopback_port))
        local = await box.exec(PROBE.format(port=loopback_port).replace("10.0.2.2", "127.0.0.1"))
    finally:
        await box.close()
    assert "tap0" in devices.stdout, devices.stdout  # it has the network it was granted
    assert probe.stdout.strip() == "REFUSED", probe
    assert local.stdout.strip() == "REFUSED", local


async def test_no_network_without_a_grant(engine_ready, runtime):
    box = await started_under(runtime)
    try:
        out = await box.exec("cat /proc/net/dev")
    finally:
        await box.close()
    assert "lo:" in out.stdout and "tap0" not in out.stdout and "eth0" not in out.stdout, out
