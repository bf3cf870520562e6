"""Isolation of the docker backend, checked with real containers in a real engine."""
# ruff: noqa: F811  (pytest fixtures imported from test_docker_fixtures)

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import SandboxError, SandboxLimits, SandboxRef, attach
from autoenvscaling.tools.sandbox.docker import LABEL, DockerSandbox, start_workspace

from .test_docker_fixtures import docker_engine, dworkspace  # noqa: F401

pytestmark = pytest.mark.docker


async def test_container_is_labelled_limited_and_has_no_network(dworkspace, docker_engine):
    info = docker_engine.api.inspect_container(dworkspace.container_id)
    host = info["HostConfig"]
    assert info["Config"]["Labels"][LABEL] == "1"
    assert host["NetworkMode"] == "none"
    assert (host["Memory"], host["PidsLimit"]) == (256 * 1024 * 1024, 64)
    assert info["NetworkSettings"]["Networks"].keys() == {"none"}


async def test_writes_stay_in_the_container(dworkspace, tmp_path):
    marker = f"/aes-{uuid.uuid4().hex}"
    result = await dworkspace.exec(f"echo secret > {marker} && cat {marker}")
    assert result.exit_code == 0 and result.stdout == "secret\n"
    assert not Path(marker).exists()
    host_only = tmp_path / "host-only.txt"
    host_only.write_text("x")
    assert (await dworkspace.exec(f"test -e {host_only}")).exit_code != 0


async def test_no_network_not_even_host_loopback(dworkspace):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        result = await dworkspace.exec(
            f"timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED; "
            "cat /proc/net/dev | tail -n +3 | cut -d: -f1",
            timeout_sec=20,
        )
        assert "CONNECTED" not in result.stdout
        assert result.stdout.split() == ["lo"]
    finally:
        server.close()


async def test_exit_code_stdout_stderr_cwd_env_user(dworkspace):
    result = await dworkspace.exec(
        "echo out; echo err >&2; pwd; echo $GREETING; id -u; exit 3",
        cwd="/tmp",
        env={"GREETING": "hello"},
        user="nobody",
    )
    assert result.exit_code == 3
    assert result.stdout.split() == ["out", "/tmp", "hello", "65534"]
    assert result.stderr == "err\n"
    missing = await dworkspace.exec("true", cwd="/no/such/dir")
    assert missing.exit_code == 1 and "/no/such/dir" in missing.stderr


async def test_timeout_kills_children_that_escaped_the_session(dworkspace):
    result = await dworkspace.exec("setsid sleep 300 & nohup sleep 300 & sleep 300", timeout_sec=1)
    assert result.timed_out and result.exit_code is None
    left = await dworkspace.exec("pgrep -c sleep || true")
    assert left.stdout.strip() == "0", left.stdout


async def test_pids_limit_stops_a_fork_bomb(dworkspace):
    result = await dworkspace.exec(
        "n=0; for i in $(seq 1 200); do sleep 2 & n=$((n+1)); done 2>/dev/null; echo started $n",
        timeout_sec=30,
    )
    forked = result.stdout.split()[-1] if result.stdout.strip() else None
    assert result.exit_code != 0 or (forked is not None and int(forked) < 200), result


async def test_timeout_at_the_pids_limit_still_kills_everything(dworkspace):
    # No room for one more process in the container: the kill must come from outside.
    result = await dworkspace.exec("while :; do sleep 100 & done 2>/dev/null", timeout_sec=3)
    assert result.timed_out
    left = await dworkspace.exec("pgrep -c sleep || true", timeout_sec=30)
    assert left.stdout.strip() == "0", left


async def test_memory_limit_kills_a_hog(dworkspace):
    result = await dworkspace.exec(
        "python3 -c 'x = bytearray(600 * 1024 * 1024); print(\"allocated\")'", timeout_sec=60
    )
    assert result.exit_code != 0 and "allocated" not in result.stdout


async def test_output_is_capped(docker_engine):
    sandbox = await start_workspace(limits=SandboxLimits(output_bytes=1000))
    try:
        result = await sandbox.exec("head -c 100000 /dev/zero | tr '\\0' x")
        assert result.truncated and "bytes truncated" in result.stdout
        assert len(result.stdout) < 1100
    finally:
        await sandbox.close()


async def test_persistent_shell_in_container_and_attach_from_ref(dworkspace):
    shell = await dworkspace.open_shell()
    await shell.run("mkdir -p /work && cd /work && export MODE=fast && echo data > f.txt")
    result = await shell.run("pwd; echo $MODE; cat f.txt")
    assert result.output == "/work\nfast\ndata\n"
    other = await attach(SandboxRef.model_validate_json(dworkspace.ref.model_dump_json()))
    assert (await other.exec("cat /work/f.txt")).stdout == "data\n"
    await other.close()  # detaching does not stop the container
    assert (await dworkspace.exec("true")).exit_code == 0


async def test_another_process_attaches_by_the_serialised_ref(dworkspace):
    await dworkspace.exec("echo from-owner > /tmp/shared.txt")
    code = (
        "import asyncio, sys\n"
        "from autoenvscaling.tools.sandbox import SandboxRef, attach\n"
        "async def main():\n"
        "    box = await attach(SandboxRef.model_validate_json(sys.stdin.read()))\n"
        "    out = await box.exec('cat /tmp/shared.txt && echo from-child > /tmp/back.txt')\n"
        "    shell = await box.open_shell()\n"
        "    print(out.stdout.strip(), (await shell.run('echo $((6*7))')).output.strip())\n"
        "    await box.close()\n"
        "asyncio.run(main())\n"
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", code],
        input=dworkspace.ref.model_dump_json(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == ["from-owner", "42"], done.stderr
    assert (await dworkspace.exec("cat /tmp/back.txt")).stdout == "from-child\n"


async def test_shell_interrupt_keeps_the_shell_and_kills_the_command(dworkspace):
    shell = await dworkspace.open_shell()
    await shell.run("cd /tmp && export KEEP=yes")
    running = await shell.run("setsid sleep 300 & sleep 300", timeout_sec=0.5)
    assert running.running
    stopped = await shell.interrupt()
    assert not stopped.running and not stopped.restarted
    # bash may first report the killed background job ("... Killed  setsid sleep 300").
    assert (await shell.run("pwd; echo $KEEP")).output.endswith("/tmp\nyes\n")
    assert (await dworkspace.exec("pgrep -c sleep || true")).stdout.strip() == "0"


async def test_shell_restarted_after_a_busy_loop_leaves_no_process(dworkspace):
    shell = await dworkspace.open_shell()
    await shell.run("while :; do sleep 0.05; done", timeout_sec=0.5)
    result = await shell.interrupt(grace_sec=1)
    assert result.restarted
    assert (await shell.run("echo alive")).output == "alive\n"
    await shell.close()
    procs = await dworkspace.exec("ps -e -o args=")
    lines = procs.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("bash --noprofile", "sleep"))], lines


async def test_upload_download_and_symlink_cannot_redirect_to_host(dworkspace, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("A")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    await dworkspace.upload(src, "/data/deep")
    assert (await dworkspace.exec("cat /data/deep/sub/a.txt")).stdout == "A"
    assert (await dworkspace.exec("/data/deep/run.sh && stat -c %U /data/deep/run.sh")).stdout == (
        "ran\nroot\n"
    )
    await dworkspace.upload(src / "sub" / "a.txt", "/single/renamed.txt")
    assert (await dworkspace.exec("cat /single/renamed.txt")).stdout == "A"
    target = tmp_path / "host-target"
    target.mkdir()
    await dworkspace.exec(f"ln -s {target} /evil")
    try:
        await dworkspace.upload(src, "/evil")
    except SandboxError as exc:  # the link dangles inside the container: refused, said why
        assert "/evil" in str(exc)
    assert list(target.iterdir()) == []
    out = tmp_path / "out"
    await dworkspace.download("/data/deep", out)
    assert (out / "sub" / "a.txt").read_text() == "A"
    assert os.access(out / "run.sh", os.X_OK)
    await dworkspace.download("/single/renamed.txt", tmp_path / "one" / "file.txt")
    assert (tmp_path / "one" / "file.txt").read_text() == "A"
    with pytest.raises(SandboxError):
        await dworkspace.download("/no/such/file", tmp_path / "none")


async def test_network_is_refused(docker_engine):
    with pytest.raises(SandboxError, match="never join a network"):
        await start_workspace(network=True)


async def test_close_removes_the_container(docker_engine):
    sandbox = await start_workspace()
    await sandbox.exec("sleep 100 &")
    await sandbox.close()
    await sandbox.close()  # twice is fine
    assert docker_engine.api.containers(all=True, filters={"id": sandbox.container_id}) == []
    with pytest.raises(SandboxError, match="not running"):
        await DockerSandbox.attach(sandbox.ref)


async def test_ref_round_trips_as_json(dworkspace):
    data = json.loads(dworkspace.ref.model_dump_json())
    assert data["backend"] == "docker" and data["handle"]["container_id"]


async def test_in_container_kill_script_when_the_host_cannot_see_the_processes(
    dworkspace, monkeypatch
):
    # A remote engine: the container's processes are not in this machine's /proc.
    from autoenvscaling.tools.sandbox import docker as backend

    monkeypatch.setattr(backend, "_kill_tree_host", lambda *args: False)
    result = await dworkspace.exec("setsid sleep 300 & nohup sleep 300 & sleep 300", timeout_sec=1)
    assert result.timed_out
    assert (await dworkspace.exec("pgrep -c sleep || true")).stdout.strip() == "0"
    shell = await dworkspace.open_shell()
    await shell.run("cd /tmp")
    assert (await shell.run("sleep 300", timeout_sec=0.3)).running
    stopped = await shell.interrupt()
    assert not stopped.restarted and (await shell.run("pwd")).output == "/tmp\n"
