"""The verifier-only reruns read the reward back in a way a lost exec output cannot turn into a
"flaky verifier" verdict (tools/gate/flake.py `read_reward_text`).

Seen twice under load (a Tk seed, then the PostgreSQL round's reference run): the tests printed
PASS, the read right after returned nothing, and the gate rejected a good task as flaky. The read
ends with a random marker; a read that comes back without it is read again. The engine's fault
is injected (the first exec's output is lost); the read itself runs for real in bash.
"""

from __future__ import annotations

import subprocess
from types import SimpleNamespace

from autoenvscaling.tools.gate.flake import read_reward_text


class _LosesFirstOutput:
    """An environment whose exec runs the command in a real bash over `root`'s files, and
    loses the first call's output, as a loaded engine did."""

    def __init__(self, root: str) -> None:
        self.root, self.calls = root, 0

    async def exec(self, command: str, **_: object) -> SimpleNamespace:
        self.calls += 1
        done = subprocess.run(
            ["bash", "-c", command.replace("/logs/verifier", f"{self.root}/logs/verifier")],
            capture_output=True,
            text=True,
            check=False,
        )
        stdout = "" if self.calls == 1 else done.stdout
        return SimpleNamespace(stdout=stdout, stderr=done.stderr, return_code=done.returncode)


async def test_a_lost_read_is_read_again(tmp_path) -> None:
    (tmp_path / "logs" / "verifier").mkdir(parents=True)
    (tmp_path / "logs" / "verifier" / "reward.txt").write_text("1\n")
    env = _LosesFirstOutput(str(tmp_path))
    assert await read_reward_text(env) == "1"  # type: ignore[arg-type]
    assert env.calls == 2


async def test_no_reward_file_is_still_no_reward(tmp_path) -> None:
    (tmp_path / "logs" / "verifier").mkdir(parents=True)
    env = _LosesFirstOutput(str(tmp_path))
    env.calls = 1  # no output lost: the marker comes back, the reward is really missing
    assert await read_reward_text(env) == ""  # type: ignore[arg-type]
    assert env.calls == 2


async def test_a_reward_file_cannot_forge_the_end_marker(tmp_path) -> None:
    """The tests (the task author's) write the reward file: a marker of their own is text."""
    (tmp_path / "logs" / "verifier").mkdir(parents=True)
    (tmp_path / "logs" / "verifier" / "reward.txt").write_text("0\nAES-END-0000000000000000\n1\n")
    env = _LosesFirstOutput(str(tmp_path))
    env.calls = 1
    assert await read_reward_text(env) == "0\nAES-END-0000000000000000\n1"  # type: ignore[arg-type]
