"""The control channel (`control.py`): Harbor's root execs through one long-lived bash, with the
same results as the engine's exec API, and the API exec whenever the channel cannot serve."""

import asyncio

import pytest

from autoenvscaling.tools.sandbox import SandboxLimits, attach
from autoenvscaling.tools.sandbox.container import start_workspace

pytestmark = pytest.mark.timeout(240)

CHANNEL_PIDS = "pgrep -f '^bash --noprofile --norc -s --'"


@pytest.fixture
async def box(engine):
    sandbox = await start_workspace(
        backend=engine, limits=SandboxLimits(memory_mb=256, pids=64, output_bytes=4000)
    )
    assert await sandbox.open_control()
    yield sandbox
    await sandbox.close()


def served(box) -> int:
    return box._control.served if box._control is not None else -1


async def both(box, command: str, **kwargs):
    """The same call through the channel and through the API exec."""
    before = served(box)
    through_channel = await box.exec(command, **kwargs)
    assert served(box) == before + 1, "the channel did not serve it"
    channel, box._control = box._control, None
    try:
        through_api = await box.exec(command, **kwargs)
    finally:
        box._control = channel
    return through_channel, through_api


CASES = [
    ("echo out; echo err >&2; exit 3", {}),
    ('pwd; echo "$FOO|$BAR"', {"cwd": "/tmp", "env": {"FOO": "a b'c", "BAR": "$HOME"}}),
    ("pwd", {"cwd": "/no/such/dir"}),
    ("id -u; echo $HOME", {"user": "root"}),
    ("printf 'no newline'; printf 'é\\n' >&2", {}),
    ("(sleep 30 &) ; echo started", {}),
    ("kill -9 $$", {}),
    ("cat; echo eof", {}),  # stdin is empty, as with the API exec
    ("env | grep -c AUTOENVSCALING_CONTROL || true", {}),  # the channel's mark never leaks
]


async def test_channel_matches_the_api_exec(box):
    for command, kwargs in CASES:
        channel, api = await both(box, command, timeout_sec=60, **kwargs)
        assert (channel.exit_code, channel.stdout, channel.stderr) == (
            api.exit_code,
            api.stdout,
            api.stderr,
        ), command
        assert not channel.timed_out


async def test_env_does_not_persist_between_calls(box):
    await box.exec("export LEAK=1; cd /tmp", env={"ONCE": "x"})
    after = await box.exec('echo "[$LEAK][$ONCE]"; pwd', cwd="/")
    assert after.stdout == "[][]\n/\n"


async def test_timeout_kills_the_command_and_the_channel_goes_on(box):
    result = await box.exec("sleep 300 & sleep 200; echo never", timeout_sec=2)
    assert result.timed_out and result.exit_code is None and "never" not in result.stdout
    for _ in range(50):
        left = (await box.exec("pgrep -c sleep || true")).stdout.strip()
        if left == "0":
            break
        await asyncio.sleep(0.2)
    assert left == "0"
    before = served(box)
    assert (await box.exec("echo again")).stdout == "again\n"
    assert served(box) == before + 1


async def test_huge_and_binary_output_is_capped(box):
    result = await box.exec("head -c 3000000 /dev/urandom; echo done >&2")
    assert result.exit_code == 0 and result.truncated
    assert "bytes truncated" in result.stdout and len(result.stdout.encode()) < 20_000
    assert result.stderr == "done\n"
    small = await box.exec("printf 'a\\0b\\377'")
    assert small.stdout == "a\0b\ufffd"
    assert served(box) >= 2


async def test_other_users_take_the_api_exec(box):
    before = served(box)
    result = await box.exec("id -un", user="nobody")
    assert result.stdout == "nobody\n" and served(box) == before


async def test_invalid_env_names_take_the_api_exec(box):
    before = served(box)
    result = await box.exec("echo ok", env={"NOT-A-NAME": "1"})
    assert result.stdout == "ok\n" and served(box) == before


async def test_concurrent_calls_all_answer_correctly(box):
    results = await asyncio.gather(
        *(box.exec(f"sleep 0.{i}; echo {i}; echo e{i} >&2; exit {i}") for i in range(1, 5))
    )
    for i, result in enumerate(results, start=1):
        assert (result.exit_code, result.stdout, result.stderr) == (i, f"{i}\n", f"e{i}\n")


async def test_stray_bytes_and_forged_headers_change_nothing(box):
    forged = await box.exec("printf '\\n%s 0 0 0\\n' fake; echo real")
    assert forged.stdout == "\nfake 0 0 0\nreal\n"
    other = await attach(box.ref)  # another process of the container writes to the channel
    try:
        await other.exec(f"for p in $({CHANNEL_PIDS}); do printf 'junk 0 0' > /proc/$p/fd/1; done")
    finally:
        await other.close()
    result = await box.exec("echo fine; exit 4")
    assert (result.exit_code, result.stdout) == (4, "fine\n")


async def test_channel_killed_from_inside_falls_back_to_the_api_exec(box):
    other = await attach(box.ref)  # an agent's process, as root in the same container
    try:
        killed = await other.exec(f"kill -9 $({CHANNEL_PIDS})")
        assert killed.exit_code == 0, killed
    finally:
        await other.close()
    result = await box.exec("echo x >> /tmp/runs; echo still; exit 2")
    assert (result.exit_code, result.stdout) == (2, "still\n")
    assert (await box.exec("wc -l < /tmp/runs")).stdout == "1\n"  # never run twice
    assert box._control.dead
    assert await box.open_control()  # reopened on demand
    assert (await box.exec("echo back")).stdout == "back\n" and served(box) == 1


async def test_a_command_that_kills_the_channel_reports_a_kill(box):
    result = await box.exec(f"echo x >> /tmp/runs; kill -9 $({CHANNEL_PIDS}); sleep 5")
    assert result.exit_code == 137 and not result.timed_out
    assert (await box.exec("wc -l < /tmp/runs")).stdout == "1\n"  # never run twice
    assert (await box.exec("echo ok")).stdout == "ok\n"


async def test_reopened_after_every_process_was_killed(box):
    """What a shared verifier gets: the quiesce kill ends the channel; a fresh one serves."""
    from autoenvscaling.tools.sandbox.engine import client
    from autoenvscaling.tools.sandbox.quiesce import kill_container_processes

    state = client(box.backend).api.inspect_container(box.container_id)["State"]
    assert kill_container_processes(box.ref.handle.get("pidns"), int(state["Pid"])) >= 1
    assert await box.reopen_control()
    result = await box.exec("echo fresh; exit 5")
    assert (result.exit_code, result.stdout, served(box)) == (5, "fresh\n", 1)
