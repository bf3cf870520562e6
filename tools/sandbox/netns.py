"""A network for a sandbox the user's policy lets have the internet, and for its image's build.

Every sandbox has no network (`network_mode none`) unless the gate grants a task the internet
(tools/gate/network.py: the task declares it and the user allows it). Then the container gets
podman's user-mode network, slirp4netns, with `allow_host_loopback=false`: its traffic leaves
through the host's own stack like any program's, but 10.0.2.2 (slirp's name for the host's
loopback) is unreachable, so nothing bound to 127.0.0.1 on the host — and the podman API,
a unix socket, is not on any network — can be reached. No bridge, no iptables, no route to a
container of another task. Services the host binds on a public address are reachable as they
are to any program on the internet.

Builds: buildah 1.28 knows no slirp4netns, so a RUN step joins the network namespace of a
holder container started with that same network (`--network ns:/proc/<pid>/ns/net`), removed
when the build ends. docker gets no network at all: its bridge reaches the host's services.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator

from .base import Backend, SandboxError
from .bases import SEED_BASE_TAGS
from .cleanup import labels
from .engine import cli_argv

SANDBOX_NETWORK = "slirp4netns:allow_host_loopback=false"
SLIRP4NETNS = "/usr/bin/slirp4netns"
#: How long a build's holder may live; the build's own timeout ends the build first.
HOLDER_SEC = 7200


def gives_internet(backend: str) -> bool:
    """Whether our engine `backend` can give a sandbox the internet without the host's loopback
    (podman, through slirp4netns; docker's bridge reaches the host's services)."""
    return backend == "podman"


def check_network(backend: Backend) -> None:
    """Raise when `backend` cannot give a sandbox the internet without the host's loopback."""
    if not gives_internet(backend):
        raise SandboxError(
            f"a task granted the internet needs the podman backend (slirp4netns): the {backend} "
            "bridge network reaches the host's services; run the gate with --backend podman"
        )
    if shutil.which("slirp4netns") is None:
        raise SandboxError(
            "a task granted the internet needs slirp4netns (apt-get install slirp4netns; "
            "`make setup` installs it)"
        )


@contextlib.contextmanager
def build_namespace(backend: Backend) -> Iterator[str]:
    """`--network` for a `podman build` whose RUN steps may reach the internet: the network
    namespace of a holder container on slirp4netns, removed afterwards."""
    check_network(backend)
    argv, env = cli_argv("podman")
    label = [f"--label={k}={v}" for k, v in labels().items()]
    started = subprocess.run(
        [*argv, "run", "-d", "--rm", "--network", SANDBOX_NETWORK, "--cap-drop=ALL",
         "--security-opt=no-new-privileges", *label, SEED_BASE_TAGS[0], "sleep", str(HOLDER_SEC)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    if started.returncode != 0:
        raise SandboxError(f"could not start the build's network holder: {started.stderr[-500:]}")
    holder = started.stdout.strip()
    try:
        pid = subprocess.run(
            [*argv, "inspect", "-f", "{{.State.Pid}}", holder],
            env=env, capture_output=True, text=True, timeout=60,
        ).stdout.strip()  # fmt: skip
        if not pid.isdigit() or pid == "0":
            raise SandboxError(f"the build's network holder {holder[:12]} is not running")
        yield f"ns:/proc/{pid}/ns/net"
    finally:
        subprocess.run(
            [*argv, "rm", "-f", "-t", "0", holder], env=env, capture_output=True, timeout=60
        )
