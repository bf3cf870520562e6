"""The sandbox contract on each engine (podman; docker in the docker tier), with real containers."""

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox import SandboxError, SandboxLimits, SandboxRef, attach, profile
from autoenvscaling.tools.sandbox.cleanup import LABEL
from autoenvscaling.tools.sandbox.container import ContainerSandbox, start_workspace


async def sleeps_left(box) -> str:
    """`pgrep -c sleep` once the init has reaped what was killed (zombies count until then)."""
    for _ in range(50):
        left = (await box.exec("pgrep -c sleep || true", timeout_sec=30)).stdout.strip()
        if left == "0":
            break
        await asyncio.sleep(0.2)
    return left


async def test_container_is_labelled_limited_and_has_no_network(eworkspace, engine_client):
    info = engine_client.api.inspect_container(eworkspace.container_id)
    host = info["HostConfig"]
    assert info["Config"]["Labels"][LABEL] == "1"
    assert host["NetworkMode"] == "none"
    assert (host["Memory"], host["PidsLimit"]) == (256 * 1024 * 1024, 64)
    assert set(info["NetworkSettings"]["Networks"]) <= {"none"}  # podman lists none at all


async def test_the_hardened_profile_seen_from_inside(eworkspace):
    status = await eworkspace.exec("grep -E '^(CapEff|NoNewPrivs|Seccomp):' /proc/self/status")
    facts = dict(line.split(":\t") for line in status.stdout.splitlines())
    assert int(facts["CapEff"], 16) == sum(1 << bit for bit in profile.CAP_BITS.values()), (
        facts
    )  # no NET_RAW, MKNOD, SYS_ADMIN, ...
    assert (facts["NoNewPrivs"], facts["Seccomp"]) == ("1", "2")
    keyring = await eworkspace.exec(
        "python3 -c 'import ctypes; l = ctypes.CDLL(None, use_errno=True); "
        "print(l.syscall(250, 0, 0, 0, 0, 0), ctypes.get_errno())'"  # keyctl(GET_KEYRING_ID)
    )
    assert keyring.stdout.split() == ["-1", "1"], keyring  # EPERM: the keyring is off-limits
    env = (await eworkspace.exec("env")).stdout
    names = {line.split("=", 1)[0] for line in env.splitlines()}
    shell_made = {"PATH", "HOME", "LANG", "TERM", "PWD", "OLDPWD", "SHLVL", "_", "HOSTNAME"}
    assert not (set(os.environ) - shell_made) & names, names  # nothing of the host's environment
    assert (await eworkspace.exec("mknod /tmp/null c 1 3")).exit_code != 0
    assert (await eworkspace.exec("echo 1 > /proc/sys/kernel/core_pattern")).exit_code != 0


async def test_limits_are_clamped_to_the_configured_maxima(engine, engine_client, monkeypatch):
    from autoenvscaling.tools.settings import get_settings

    monkeypatch.setenv("AUTOENVSCALING_MAX_MEMORY_MB", "300")
    monkeypatch.setenv("AUTOENVSCALING_MAX_PIDS", "50")
    get_settings.cache_clear()
    try:
        box = await start_workspace(
            backend=engine, limits=SandboxLimits(memory_mb=100_000, pids=100_000, cpus=512)
        )
    finally:
        get_settings.cache_clear()
    try:
        host = engine_client.api.inspect_container(box.container_id)["HostConfig"]
        assert (host["Memory"], host["PidsLimit"]) == (300 * 1024 * 1024, 50)
        assert host["NanoCpus"] <= (os.cpu_count() or 1) * 1e9
    finally:
        await box.close()


async def test_writes_stay_in_the_container(eworkspace, tmp_path):
    marker = f"/aes-{uuid.uuid4().hex}"
    result = await eworkspace.exec(f"echo secret > {marker} && cat {marker}")
    assert result.exit_code == 0 and result.stdout == "secret\n"
    assert not Path(marker).exists()
    host_only = tmp_path / "host-only.txt"
    host_only.write_text("x")
    assert (await eworkspace.exec(f"test -e {host_only}")).exit_code != 0


async def test_no_network_not_even_host_loopback(eworkspace):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        result = await eworkspace.exec(
            f"timeout 5 bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' && echo CONNECTED; "
            "cat /proc/net/dev | tail -n +3 | cut -d: -f1",
            timeout_sec=20,
        )
        assert "CONNECTED" not in result.stdout
        assert result.stdout.split() == ["lo"]
    finally:
        server.close()


async def test_exit_code_stdout_stderr_cwd_env_user(eworkspace):
    result = await eworkspace.exec(
        "echo out; echo err >&2; pwd; echo $GREETING; id -u; exit 3",
        cwd="/tmp",
        env={"GREETING": "hello"},
        user="nobody",
    )
    assert result.exit_code == 3
    assert result.stdout.split() == ["out", "/tmp", "hello", "65534"]
    assert result.stderr == "err\n"
    missing = await eworkspace.exec("true", cwd="/no/such/dir")
    assert missing.exit_code == 1 and "/no/such/dir" in missing.stderr


async def test_timeout_kills_children_that_escaped_the_session(eworkspace):
    result = await eworkspace.exec("setsid sleep 300 & nohup sleep 300 & sleep 300", timeout_sec=1)
    assert result.timed_out and result.exit_code is None
    assert await sleeps_left(eworkspace) == "0"


async def test_pids_limit_stops_a_fork_bomb(eworkspace):
    result = await eworkspace.exec(
        "n=0; for i in $(seq 1 200); do sleep 2 & n=$((n+1)); done 2>/dev/null; echo started $n",
        timeout_sec=30,
    )
    forked = result.stdout.split()[-1] if result.stdout.strip() else None
    assert result.exit_code != 0 or (forked is not None and int(forked) < 200), result


async def test_timeout_at_the_pids_limit_still_kills_everything(eworkspace):
    # No room for one more process in the container: the kill must come from outside.
    result = await eworkspace.exec("while :; do sleep 100 & done 2>/dev/null", timeout_sec=3)
    assert result.timed_out
    assert await sleeps_left(eworkspace) == "0"


async def test_memory_limit_kills_a_hog(eworkspace):
    result = await eworkspace.exec(
        "python3 -c 'x = bytearray(600 * 1024 * 1024); print(\"allocated\")'", timeout_sec=60
    )
    assert result.exit_code != 0 and "allocated" not in result.stdout
    if eworkspace.backend == "podman":
        # conmon records the kill as a file named `oom` in its working folder: the service's own
        # folder, never the folder the caller runs in (it was the checkout's root).
        from autoenvscaling.tools.sandbox.podman_service import _SERVICE

        assert _SERVICE.folder is not None and (_SERVICE.folder / "oom").exists()


async def test_output_is_capped(engine):
    sandbox = await start_workspace(backend=engine, limits=SandboxLimits(output_bytes=1000))
    try:
        result = await sandbox.exec("head -c 100000 /dev/zero | tr '\\0' x")
        assert result.truncated and "bytes truncated" in result.stdout
        assert len(result.stdout) < 1100
    finally:
        await sandbox.close()


async def test_persistent_shell_in_container_and_attach_from_ref(eworkspace):
    shell = await eworkspace.open_shell()
    await shell.run("mkdir -p /work && cd /work && export MODE=fast && echo data > f.txt")
    result = await shell.run("pwd; echo $MODE; cat f.txt")
    assert result.output == "/work\nfast\ndata\n"
    other = await attach(SandboxRef.model_validate_json(eworkspace.ref.model_dump_json()))
    assert (await other.exec("cat /work/f.txt")).stdout == "data\n"
    await other.close()  # detaching does not stop the container
    assert (await eworkspace.exec("true")).exit_code == 0


async def test_another_process_attaches_by_the_serialised_ref(eworkspace):
    await eworkspace.exec("echo from-owner > /tmp/shared.txt")
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
        input=eworkspace.ref.model_dump_json(),
        capture_output=True,
        text=True,
        timeout=180,  # a fresh Python and its own podman service, on a loaded machine
    )
    assert done.stdout.split() == ["from-owner", "42"], done.stderr
    assert (await eworkspace.exec("cat /tmp/back.txt")).stdout == "from-child\n"


async def test_shell_interrupt_keeps_the_shell_and_kills_the_command(eworkspace):
    shell = await eworkspace.open_shell()
    await shell.run("cd /tmp && export KEEP=yes")
    running = await shell.run("setsid sleep 300 & sleep 300", timeout_sec=0.5)
    assert running.running
    stopped = await shell.interrupt()
    assert not stopped.running and not stopped.restarted
    # bash may first report the killed background job ("... Killed  setsid sleep 300").
    assert (await shell.run("pwd; echo $KEEP")).output.endswith("/tmp\nyes\n")
    assert await sleeps_left(eworkspace) == "0"


async def test_shell_restarted_after_a_busy_loop_leaves_no_process(eworkspace):
    shell = await eworkspace.open_shell()
    await shell.run("while :; do sleep 0.05; done", timeout_sec=0.5)
    result = await shell.interrupt(grace_sec=1)
    assert result.restarted
    assert (await shell.run("echo alive")).output == "alive\n"
    await shell.close()
    procs = await eworkspace.exec("ps -e -o args=")
    lines = procs.stdout.splitlines()
    assert not [line for line in lines if line.startswith(("bash --noprofile", "sleep"))], lines


async def test_upload_download_and_symlink_cannot_redirect_to_host(eworkspace, tmp_path):
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "a.txt").write_text("A")
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    (src / "run.sh").chmod(0o755)
    await eworkspace.upload(src, "/data/deep")
    assert (await eworkspace.exec("cat /data/deep/sub/a.txt")).stdout == "A"
    assert (await eworkspace.exec("/data/deep/run.sh && stat -c %U /data/deep/run.sh")).stdout == (
        "ran\nroot\n"
    )
    await eworkspace.upload(src / "sub" / "a.txt", "/single/renamed.txt")
    assert (await eworkspace.exec("cat /single/renamed.txt")).stdout == "A"
    target = tmp_path / "host-target"
    target.mkdir()
    await eworkspace.exec(f"ln -s {target} /evil")
    try:
        await eworkspace.upload(src, "/evil")
    except SandboxError as exc:  # the link dangles inside the container: refused, said why
        assert "/evil" in str(exc)
    assert list(target.iterdir()) == []
    out = tmp_path / "out"
    await eworkspace.download("/data/deep", out)
    assert (out / "sub" / "a.txt").read_text() == "A"
    assert os.access(out / "run.sh", os.X_OK)
    await eworkspace.download("/single/renamed.txt", tmp_path / "one" / "file.txt")
    assert (tmp_path / "one" / "file.txt").read_text() == "A"
    with pytest.raises(SandboxError):
        await eworkspace.download("/no/such/file", tmp_path / "none")


async def test_close_removes_the_container(engine, engine_client):
    sandbox = await start_workspace(backend=engine)
    await sandbox.exec("sleep 100 &")
    await sandbox.close()
    await sandbox.close()  # twice is fine
    assert engine_client.api.containers(all=True, filters={"id": sandbox.container_id}) == []
    with pytest.raises(SandboxError, match="not running"):
        await ContainerSandbox.attach(sandbox.ref)


async def test_ref_round_trips_as_json(eworkspace, engine):
    data = json.loads(eworkspace.ref.model_dump_json())
    assert data["backend"] == engine and data["handle"]["container_id"]


async def test_in_container_kill_script_when_the_host_cannot_see_the_processes(
    eworkspace, monkeypatch
):
    # A remote engine: the container's processes are not in this machine's /proc.
    from autoenvscaling.tools.sandbox import container

    monkeypatch.setattr(container, "kill_tree_host", lambda *args: False)
    result = await eworkspace.exec("setsid sleep 300 & nohup sleep 300 & sleep 300", timeout_sec=1)
    assert result.timed_out
    assert await sleeps_left(eworkspace) == "0"
    shell = await eworkspace.open_shell()
    await shell.run("cd /tmp")
    assert (await shell.run("sleep 300", timeout_sec=0.3)).running
    stopped = await shell.interrupt()
    assert not stopped.restarted and (await shell.run("pwd")).output == "/tmp\n"
