"""A scripted shared policy for flywheel tests, also in other processes (the CLI, a `langgraph dev`
server): `python -m tests.flywheel_policy MODULE ARGS...` runs `python -m MODULE ARGS...` with the
policy registered as `POLICY`.

Only the model's replies are scripted; the tools they call act for real. Decisions depend on the
conversation, not on call order, so a resumed run replays the same way.
"""

from __future__ import annotations

import itertools
import runpy
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call

POLICY = "scripted:flywheel-shared"

NUMBERS = "3\n14\n15\n92\n65\n"
BUG = "head -n 3 /app/numbers.txt | awk '{s += $1} END {print s}'"
FIX = "awk '{s += $1} END {print s}' /app/numbers.txt"
FILES = {
    "instruction.md": "The file `/app/numbers.txt` holds one integer per line.\n\n"
    "Write their sum to `/app/sum.txt`: a single integer and a newline.\n",
    "task.toml": 'schema_version = "1.4"\n\n[metadata]\nauthor_name = "test"\n'
    'difficulty = "easy"\ncategory = "text-processing"\ntags = ["awk"]\n\n'
    "[agent]\ntimeout_sec = 120\n\n[verifier]\ntimeout_sec = 60\n\n"
    '[environment]\nnetwork_mode = "no-network"\ncpus = 1\nmemory_mb = 512\n'
    "build_timeout_sec = 120\n",
    "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n"
    "COPY numbers.txt /app/numbers.txt\n",
    "environment/numbers.txt": NUMBERS,
    "tests/numbers.txt": NUMBERS,
    "tests/test.sh": "#!/bin/bash\n# The reward is 1 only when /app/sum.txt holds the right sum.\n"
    "mkdir -p /logs/verifier\necho 0 > /logs/verifier/reward.txt\n"
    "expected=$(awk '{s += $1} END {print s}' /tests/numbers.txt)\n"
    'if [ "$(cat /app/sum.txt 2>/dev/null)" = "$expected" ]; then\n'
    "  echo PASS; echo 1 > /logs/verifier/reward.txt\n"
    'else\n  echo "FAIL: expected $expected"\nfi\n',
    "solution/solve.sh": f"#!/bin/bash\nset -euo pipefail\n{FIX} > /app/sum.txt\n",
}
# The second proposal's reference solution sums only 3 of 5 numbers: the oracle stage rejects it.
BROKEN = {**FILES, "solution/solve.sh": FILES["solution/solve.sh"].replace(FIX, BUG)}


def blocks(files: dict[str, str]) -> str:
    return "\n".join(f'<file path="{p}">\n{c}</file>' for p, c in files.items())


def shared_policy() -> Callable[[Sequence[BaseMessage]], AIMessage | str]:
    """One model for both roles, as in self-play; it tells them apart by the system prompt."""
    solver_episodes = itertools.count()

    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        system = str(messages[0].content) if isinstance(messages[0], SystemMessage) else ""
        first_turn = not any(isinstance(m, AIMessage) for m in messages)
        if "skilled terminal agent" in system:  # the solver
            if not first_turn:
                return "Done."
            # Every other episode solves: calibration measures a mean reward of 0.5.
            if next(solver_episodes) % 2 == 0:
                return reply("", tool_call("run", command=f"{FIX} > /app/sum.txt"))
            return reply("", tool_call("run", command="ls"))
        brief = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        return blocks(FILES if "proposal 1 of" in brief else BROKEN)

    return respond


def run_with_policy(policy: str, respond: Callable, argv: list[str]) -> None:
    """Run module `argv[0]` as `__main__` (as `python -m` does) with `respond` registered as the
    scripted model `policy` (`scripted:NAME`): how a test hands a policy to a CLI subprocess."""
    register(policy.removeprefix("scripted:"), respond)
    sys.argv = list(argv)
    runpy.run_module(argv[0], run_name="__main__", alter_sys=True)


def run_argv(run_dir: Path, *options: str) -> list[str]:
    """`autoenvscaling run` in its own process, with the shared policy registered as POLICY."""
    return [
        sys.executable,
        "-m",
        "tests.flywheel_policy",
        "autoenvscaling.cli.main",
        "run",
        "--run-dir",
        str(run_dir),
        "--model",
        POLICY,
        *options,
    ]


def main(argv: list[str]) -> None:
    run_with_policy(POLICY, shared_policy(), argv)


if __name__ == "__main__":
    main(sys.argv[1:])
