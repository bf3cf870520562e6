"""The proposer's candidate folder is bound into its workspace sandbox (`binds`)."""

import pytest

from autoenvscaling.tools.sandbox import SandboxError, SandboxLimits
from autoenvscaling.tools.sandbox.container import start_workspace


async def test_bound_folder_is_shared_both_ways_and_survives_the_sandbox(engine_ready, tmp_path):
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "from_host.txt").write_text("written on the host\n")
    sandbox = await start_workspace(
        limits=SandboxLimits(memory_mb=256, pids=64), binds=[(candidate, "/workspace/task")]
    )
    try:
        seen = await sandbox.exec("cat /workspace/task/from_host.txt")
        assert seen.stdout == "written on the host\n"
        made = await sandbox.exec(
            "mkdir -p /workspace/task/tests && echo 1 > /workspace/task/tests/x"
        )
        assert made.exit_code == 0
        assert (candidate / "tests" / "x").read_text() == "1\n"
        # Outside the bind, the sandbox's writes stay in its container.
        await sandbox.exec("echo private > /workspace/private.txt")
        assert not (tmp_path / "private.txt").exists()
    finally:
        await sandbox.close()
    # Deleting the sandbox's run folder must not reach through the bind into the host folder.
    assert (candidate / "from_host.txt").read_text() == "written on the host\n"
    assert (candidate / "tests" / "x").exists()


async def test_bind_of_a_missing_host_folder_is_refused(engine_ready, tmp_path):
    with pytest.raises(SandboxError, match="not a folder"):
        await start_workspace(binds=[(tmp_path / "nope", "/workspace/task")])
