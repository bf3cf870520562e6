"""A network only for a task granted the internet, and never the host's loopback (netns.py).

Only loopback is ever targeted: a server of this test listens on the host's 127.0.0.1. A
sandbox without a grant has no interface but `lo`; a granted one has slirp4netns's `tap0` and a
resolver, yet the host's loopback (slirp's 10.0.2.2) is unreachable from it and from a build
step; the control (slirp4netns with `allow_host_loopback=true`, run by hand here) reaches the
same server, so the refusal is the profile's doing, not a dead server.
"""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox.base import SandboxError
from autoenvscaling.tools.sandbox.bases import SEED_BASE_TAGS
from autoenvscaling.tools.sandbox.container import start_workspace
from autoenvscaling.tools.sandbox.engine import cli_argv
from autoenvscaling.tools.sandbox.images import build_image, remove_task_image
from autoenvscaling.tools.sandbox.netns import check_network

# bash's /dev/tcp: no tool needed in the image; prints one word.
PROBE = (
    "bash -c 'if (exec 3<>/dev/tcp/10.0.2.2/{port}) 2>/dev/null; then echo REACHED; "
    "else echo REFUSED; fi'"
)


@pytest.fixture
def loopback_server() -> Iterator[int]:
    server = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def test_only_podman_with_slirp4netns_gives_a_network():
    with pytest.raises(SandboxError, match="needs the podman backend"):
        check_network("docker")
    if shutil.which("slirp4netns"):
        check_network("podman")


async def test_no_network_without_a_grant(engine_ready):
    sandbox = await start_workspace()
    try:
        out = await sandbox.exec("cat /proc/net/dev")
        assert "tap0" not in out.stdout and "eth0" not in out.stdout, out.stdout
    finally:
        await sandbox.close()


async def test_a_granted_sandbox_never_reaches_the_hosts_loopback(engine_ready, loopback_server):
    sandbox = await start_workspace(network=True)
    try:
        assert sandbox.ref.network
        devices = await sandbox.exec("cat /proc/net/dev; cat /etc/resolv.conf")
        assert "tap0" in devices.stdout and "nameserver" in devices.stdout, devices.stdout
        probe = await sandbox.exec(PROBE.format(port=loopback_server))
        assert probe.stdout.strip() == "REFUSED", probe
    finally:
        await sandbox.close()
    # the control: the same network with the host's loopback allowed reaches the server
    argv, env = cli_argv("podman")
    control = subprocess.run(
        [*argv, "run", "--rm", "--network", "slirp4netns:allow_host_loopback=true",
         SEED_BASE_TAGS[0], "bash", "-c", PROBE.format(port=loopback_server)[9:-1]],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert control.stdout.strip() == "REACHED", control.stderr


async def test_a_granted_build_never_reaches_the_hosts_loopback(
    engine_ready, loopback_server, tmp_path: Path
):
    env_dir = tmp_path / "probe-build" / "environment"
    env_dir.mkdir(parents=True)
    # The RUN's result is the image's file: the build fails if the loopback answers.
    (env_dir / "Dockerfile").write_text(
        f"FROM {SEED_BASE_TAGS[0]}\n"
        f"RUN grep -q tap0 /proc/net/dev && {PROBE.format(port=loopback_server)} > /net.txt "
        "&& grep -qx REFUSED /net.txt\n"
    )
    image = await build_image(env_dir, task_name="probe-build", network=True, force=True)
    try:
        assert image.built
    finally:
        remove_task_image(env_dir.parent)
