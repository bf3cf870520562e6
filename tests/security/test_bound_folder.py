"""Privilege out of a sandbox: nothing a proposer's workspace writes into the bound candidate
folder carries privilege on the host (issue 28, item 4).

The attack is what container root can do in the folder the proposer's workspace binds in: a
setuid-root copy of bash (run on the host by an unprivileged user it gives euid 0), setuid and
setgid bits by every call that sets a mode, a FIFO, a hard link. The defence: the bind is
nosuid,nodev; the workspace's seccomp profile refuses setuid/setgid modes; the folder is made
plain when the session ends; lint (`task-limits`) refuses what is left.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from autoenvscaling.graphs.proposer.settings import TASK_MOUNT
from autoenvscaling.graphs.proposer.workspace import workspace_with_task
from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.sandbox import SandboxLimits
from autoenvscaling.tools.tasks.limits import inventory
from tests.security.conftest import BACKEND

pytestmark = [pytest.mark.timeout(180)]

ATTACK = f"""\
cd {TASK_MOUNT}
cp /bin/bash rootbash; chmod u+s rootbash
cp /bin/bash rootbash2; chmod 4755 rootbash2
cp -a /usr/bin/passwd passwd-copy 2>&1
install -m 2755 /bin/true sgid-true 2>&1
python3 -c 'import os; os.close(os.open("made-setuid", os.O_CREAT | os.O_WRONLY, 0o4755))' 2>&1
tar -C /usr/bin -cf /tmp/p.tar passwd && mkdir -p untar && tar -C untar -xpf /tmp/p.tar 2>&1
mkfifo fifo; echo data > plain; ln plain hardlink
grep " {TASK_MOUNT} " /proc/mounts
echo attack-done
"""


def _setid(folder: Path) -> list[str]:
    found = []
    for path in folder.rglob("*"):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode) and info.st_mode & (stat.S_ISUID | stat.S_ISGID):
            found.append(f"{path.name} {stat.filemode(info.st_mode)}")
    return found


async def test_bound_folder_carries_no_privilege(engine_ready, tmp_path: Path):
    candidate = tmp_path / "candidate"
    candidate.mkdir()
    (candidate / "task.toml").write_text('schema_version = "1.4"\n')
    opener = workspace_with_task(candidate, SandboxLimits(memory_mb=256, pids=64), BACKEND)
    async with opener() as shell:
        result = await shell.run(ATTACK, timeout_sec=60)
        output = result.output
        assert "attack-done" in output, output
        # While the session is live: what the host folder holds now.
        live = _setid(candidate)
    mount = next((ln for ln in output.splitlines() if f" {TASK_MOUNT} " in ln), "")
    options = set(mount.split()[3].split(",")) if mount else set()
    assert {"nosuid", "nodev"} <= options, f"the bind is mounted {mount!r}"
    assert not live, f"setuid/setgid files on the host during the session: {live}\n{output}"
    assert not _setid(candidate), "setuid/setgid files on the host after the session"
    kinds = {p.name: p.lstat() for p in candidate.rglob("*")}
    assert not [n for n, i in kinds.items() if stat.S_ISFIFO(i.st_mode)], "a FIFO was left"
    assert all(i.st_nlink == 1 for i in kinds.values() if stat.S_ISREG(i.st_mode)), (
        "a hard link was left"
    )
    assert not inventory(candidate)


def test_lint_refuses_privileged_files(tmp_path: Path):
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "tool").write_text("#!/bin/sh\n")
    os.chmod(folder / "tool", 0o4755)
    (folder / "data").write_text("x\n")
    os.link(folder / "data", tmp_path / "outside")
    problems = {p.file: p.problem for p in inventory(folder)}
    assert "setuid" in problems.get("tool", ""), problems
    assert "hard link" in problems.get("data", ""), problems
    assert any(f.rule == "task-limits" for f in lint_task(folder).errors)
