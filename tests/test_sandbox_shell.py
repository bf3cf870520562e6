"""The persistent shell protocol, over a plain local bash (the sandboxed one is in test_sandbox_engine)."""

import asyncio

import pytest

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


@pytest.fixture
async def shell():
    s = await PersistentShell.start(
        _local_bash, cwd="/tmp", env={"GREETING": "hi"}, output_cap=2000
    )
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
