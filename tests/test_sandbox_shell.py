"""The persistent shell protocol, over a plain local bash (the sandboxed one is in test_sandbox_engine),
and the same behaviour from the exec shell (tools/sandbox/exec_shell.py) over Harbor's `exec`
contract served by this machine's bash (over real environments in test_exec_terminal)."""

import asyncio

import pytest
from harbor.environments.base import ExecResult

from autoenvscaling.tools.sandbox.exec_shell import ExecShell
from autoenvscaling.tools.sandbox.shell import PersistentShell, ShellBusyError


async def _local_bash() -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        "bash",
        "--noprofile",
        "--norc",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )


class LocalExec:
    """Harbor's `exec` contract (`BaseEnvironment.exec`) over this machine's bash."""

    def __init__(self) -> None:
        self.calls = 0

    async def exec(self, command, cwd=None, env=None, timeout_sec=None, user=None):
        self.calls += 1
        proc = await asyncio.create_subprocess_shell(
            command,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=cwd,
            start_new_session=True,
        )
        out, err = await asyncio.wait_for(proc.communicate(), timeout_sec)
        return ExecResult(stdout=out.decode(), stderr=err.decode(), return_code=proc.returncode)


@pytest.fixture(params=["persistent", "exec"])
async def shell(request):
    if request.param == "persistent":
        s = await PersistentShell.start(
            _local_bash, cwd="/tmp", env={"GREETING": "hi"}, output_cap=2000
        )
    else:
        s = ExecShell(LocalExec(), cwd="/tmp", env={"GREETING": "hi"}, output_cap=2000)
    yield s
    await s.close()


async def test_state_persists_between_commands(shell):
    assert (
        await shell.run("echo $GREETING; cd /usr; export X=42; f() { echo fn; }")
    ).output == "hi\n"
    result = await shell.run("pwd; echo $X; f")
    assert result.output == "/usr\n42\nfn\n"
    assert result.exit_code == 0


async def test_exit_code_and_stderr_interleaved(shell):
    result = await shell.run("echo out; echo err >&2; exit_code() { return 7; }; exit_code")
    assert result.exit_code == 7
    assert result.output == "out\nerr\n"


async def test_command_cannot_read_protocol_stdin(shell):
    result = await shell.run("cat; echo after", timeout_sec=5)
    assert result.output == "after\n" and result.exit_code == 0


async def test_output_is_capped_with_visible_marker(shell):
    result = await shell.run("head -c 50000 /dev/zero | tr '\\0' a; echo; echo END")
    assert result.truncated and result.output_bytes == 50005
    assert "bytes truncated" in result.output and result.output.endswith("END\n")
    assert len(result.output) < 2100


async def test_long_command_keeps_running_then_read_collects_rest(shell):
    first = await shell.run("echo start; sleep 1; echo end", timeout_sec=0.2)
    assert first.running and first.exit_code is None and first.output == "start\n"
    with pytest.raises(ShellBusyError):
        await shell.run("true")
    rest = await shell.read(timeout_sec=10)
    assert not rest.running and rest.exit_code == 0 and rest.output == "end\n"


async def test_interrupt_kills_command_but_keeps_state(shell):
    await shell.run("cd /etc")
    started = await shell.run("sleep 30", timeout_sec=0.2)
    assert started.running
    stopped = await shell.interrupt()
    assert not stopped.running and stopped.exit_code != 0
    assert (await shell.run("pwd")).output == "/etc\n"


async def test_interrupt_of_a_loop_restarts_the_shell(shell):
    await shell.run("while true; do sleep 0.05; done", timeout_sec=0.2)
    stopped = await shell.interrupt(grace_sec=0.5)
    assert stopped.restarted and stopped.exit_code == 130
    assert (await shell.run("echo alive")).output == "alive\n"


async def test_exit_restarts_on_next_command(shell):
    gone = await shell.run("exit 3")
    assert gone.exit_code == 3 and "shell exited" in gone.output
    again = await shell.run("echo back")
    assert again.restarted and again.output == "back\n"


# ------------------------------------------------------------ what only the exec shell has to show


async def test_exec_shell_report_cannot_be_forged_and_keeps_any_bytes():
    shell = ExecShell(LocalExec(), output_cap=2000)
    try:
        # What a command prints is never read as the report: a fake header, the separator, bytes
        # that are not UTF-8. One exec per short command.
        result = await shell.run("echo '__AES_EXEC_x__ d:0 0'; echo --; printf '\\377ok\\n'")
        assert result.exit_code == 0 and not result.running
        assert result.output == "__AES_EXEC_x__ d:0 0\n--\n\ufffdok\n" and result.output_bytes == 28
        assert shell._environment.calls == 1
    finally:
        await shell.close()


async def test_exec_shell_output_spread_over_several_waits_is_capped_once(monkeypatch):
    from autoenvscaling.tools.sandbox import exec_scripts

    monkeypatch.setattr(exec_scripts, "CHUNK_MS", 150)  # several execs within one run call
    local = LocalExec()
    shell = ExecShell(local, output_cap=2000)
    try:
        script = (
            "for i in 1 2 3 4; do head -c 3000 /dev/zero | tr '\\0' a; sleep 0.2; done; echo END"
        )
        result = await shell.run(script, timeout_sec=30)
        assert local.calls >= 3 and result.exit_code == 0
        assert result.output_bytes == 12004 and result.truncated
        assert result.output.startswith("a" * 1000) and result.output.endswith("a" * 996 + "END\n")
        assert "[... 10004 bytes truncated ...]" in result.output
    finally:
        await shell.close()


async def test_exec_shell_close_ends_its_command_and_removes_its_files(tmp_path):
    import os

    shell = ExecShell(LocalExec())
    started = await shell.run(f"echo $$ > {tmp_path}/pid; exec sleep 300", timeout_sec=0.3)
    assert started.running
    pid = int((tmp_path / "pid").read_text())
    await shell.close()
    await asyncio.sleep(0.2)
    assert not os.path.exists(shell._base)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read().split()[2]
