"""Isolation of the bwrap backend, checked with real processes in real sandboxes."""

import asyncio
import os
import socket
import uuid
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import SandboxError, SandboxLimits, attach
from autoenvscaling.tools.sandbox.bwrap import BwrapSandbox, start_workspace
from autoenvscaling.tools.sandbox.shell import host_descendants


async def test_writes_stay_in_the_overlay(workspace, tmp_path):
    marker = f"/aes-{uuid.uuid4().hex}"
    result = await workspace.exec(f"echo secret > {marker} && cat {marker}")
    assert result.exit_code == 0 and result.stdout == "secret\n"
    assert not Path(marker).exists()
    # The host's files are not even visible: the root is the sandbox's own rootfs.
    host_only = tmp_path / "host-only.txt"
    host_only.write_text("x")
    assert (await workspace.exec(f"test -e {host_only}")).exit_code != 0


async def test_no_network_not_even_host_loopback(workspace):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        result = await workspace.exec(
            f"timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED; "
            "cat /proc/net/dev | tail -n +3 | cut -d: -f1",
            timeout_sec=20,
        )
        assert "CONNECTED" not in result.stdout
        assert result.stdout.split() == ["lo"]  # only the sandbox's own, unconfigured loopback
    finally:
        server.close()


async def test_timeout_kills_children_that_escaped_the_session(workspace):
    result = await workspace.exec("setsid sleep 300 & nohup sleep 300 & sleep 300", timeout_sec=1)
    assert result.timed_out and result.exit_code is None
    await asyncio.sleep(0.2)
    left = await workspace.exec("pgrep -c sleep || true")
    # The sandbox's own holder is `sleep infinity`; nothing else may survive.
    assert left.stdout.strip() == "1", left.stdout


async def test_pids_limit_stops_a_fork_bomb(workspace):
    # The workspace allows 64 processes; 200 background sleeps must hit the wall.
    result = await workspace.exec(
        "n=0; for i in $(seq 1 200); do sleep 2 & n=$((n+1)); done 2>/dev/null; echo started $n",
        timeout_sec=30,
    )
    forked = result.stdout.split()[-1] if result.stdout.strip() else None
    assert result.exit_code != 0 or (forked is not None and int(forked) < 200), result


async def test_memory_limit_kills_a_hog(workspace):
    result = await workspace.exec(
        "python3 -c 'x = bytearray(600 * 1024 * 1024); print(\"allocated\")'", timeout_sec=60
    )
    assert result.exit_code != 0 and "allocated" not in result.stdout


async def test_output_is_capped(bwrap_ready):
    sandbox = await start_workspace(limits=SandboxLimits(output_bytes=1000))
    try:
        result = await sandbox.exec("head -c 100000 /dev/zero | tr '\\0' x")
        assert result.truncated and "bytes truncated" in result.stdout and len(result.stdout) < 1100
    finally:
        await sandbox.close()


async def test_persistent_shell_in_sandbox_and_attach_from_ref(workspace):
    shell = await workspace.open_shell()
    await shell.run("mkdir -p /work && cd /work && export MODE=fast && echo data > f.txt")
    result = await shell.run("pwd; echo $MODE; cat f.txt")
    assert result.output == "/work\nfast\ndata\n"
    # Another client attaches by the serialisable reference and sees the same files.
    ref_json = workspace.ref.model_dump_json()
    from autoenvscaling.tools.sandbox import SandboxRef

    other = await attach(SandboxRef.model_validate_json(ref_json))
    assert (await other.exec("cat /work/f.txt")).stdout == "data\n"
    await other.close()  # detaching does not stop the sandbox
    assert (await workspace.exec("true")).exit_code == 0


async def test_upload_download_and_symlink_cannot_redirect_to_host(workspace, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("A")
    await workspace.upload(src, "/data")
    assert (await workspace.exec("cat /data/sub/a.txt")).stdout == "A"
    # A planted symlink to a host folder must not make an upload write onto the host.
    target = tmp_path / "host-target"
    target.mkdir()
    await workspace.exec(f"ln -s {target} /evil")
    try:
        await workspace.upload(src, "/evil")
    except SandboxError as exc:  # the link dangles inside the sandbox: refused, said why
        assert "/evil" in str(exc)
    assert list(target.iterdir()) == []
    out = tmp_path / "out"
    await workspace.download("/data", out)
    assert (out / "sub" / "a.txt").read_text() == "A"


async def test_close_removes_everything(bwrap_ready):
    sandbox = await start_workspace()
    holder = int(sandbox.ref.handle["holder_pid"])
    run_dir = Path(sandbox.ref.handle["run_dir"])
    await sandbox.exec("sleep 100 &")
    await sandbox.close()
    assert not run_dir.exists()
    assert not Path(f"/proc/{holder}").exists() or host_descendants(holder) == []
    with pytest.raises(SandboxError):
        await BwrapSandbox.attach(sandbox.ref)
    for group in sandbox.ref.handle["cgroups"]:
        assert not os.path.exists(group)


async def test_a_crashed_owner_leaves_nothing_behind(bwrap_ready, tmp_path):
    """SIGKILL the process that owns a sandbox: the holder dies with it, the overlay is swept."""
    import subprocess
    import sys

    script = tmp_path / "owner.py"
    script.write_text(
        "import asyncio, sys\n"
        "from autoenvscaling.tools.sandbox.bwrap import start_workspace\n"
        "async def main():\n"
        "    s = await start_workspace()\n"
        "    await s.exec('sleep 1000 &')\n"
        "    print(s.ref.model_dump_json(), flush=True)\n"
        "    await asyncio.sleep(1000)\n"
        "asyncio.run(main())\n"
    )
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    from autoenvscaling.tools.sandbox import SandboxRef
    from autoenvscaling.tools.sandbox.bwrap import sweep_stale

    ref = SandboxRef.model_validate_json(owner.stdout.readline())
    owner.kill()
    owner.wait()
    holder = int(ref.handle["holder_pid"])
    for _ in range(100):  # --die-with-parent takes the holder down (give a loaded machine time)
        if (
            not Path(f"/proc/{holder}/stat").exists()
            or " Z " in Path(f"/proc/{holder}/stat").read_text()
        ):
            break
        await asyncio.sleep(0.1)
    assert ref.id in sweep_stale()
    assert not Path(ref.handle["run_dir"]).exists()
