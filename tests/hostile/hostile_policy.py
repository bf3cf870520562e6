"""A scripted policy that makes each proposer recreate one hostile corpus case with its terminal.

Served to the CLI as `POLICY` by `python -m tests.hostile.hostile_policy MODULE ARGS`. Proposer slot
i unpacks case `FLYWHEEL_CASES[i]` (built by tests/hostile/corpus.py, shipped as a base64 tar
that keeps FIFOs, links and odd names) into its candidate folder with shell commands, then
submits; after a rejection it stops talking. The solver gives up at once. Only the replies are
scripted: the terminal, the gate and the pool act for real.
"""

from __future__ import annotations

import base64
import io
import re
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from autoenvscaling.graphs.agent.scripted_model import reply, tool_call

from .corpus import CASES, make_corpus

TASK_MOUNT = "/workspace/task"
CHUNK = 24_000
# Every lint case but the socket (tar cannot carry one) and the folders that are not tasks,
# plus trial cases that reward, hang and flood.
SKIP = {"socket-in-solution", "empty-folder", "not-a-folder", "does-not-exist"}
TRIAL = ("reward-nan", "reward-above-one", "verifier-hangs", "output-flood")
FLYWHEEL_CASES = [c.name for c in CASES if c.stage == "lint" and c.name not in SKIP] + list(TRIAL)


@cache
def _archives() -> dict[str, str]:
    """Case name -> base64 of a gzipped tar of its folder (built once per process)."""
    out = {}
    with tempfile.TemporaryDirectory(prefix="aes-hostile-") as tmp:
        corpus = make_corpus(Path(tmp))
        for name in FLYWHEEL_CASES:
            data = io.BytesIO()
            with tarfile.open(
                fileobj=data, mode="w:gz", format=tarfile.GNU_FORMAT, errors="surrogateescape"
            ) as tar:
                tar.add(corpus[name][1], arcname=".")
            out[name] = base64.b64encode(data.getvalue()).decode()
    return out


def _proposer_steps(name: str) -> list[AIMessage]:
    blob = _archives()[name]
    chunks = [blob[i : i + CHUNK] for i in range(0, len(blob), CHUNK)]
    steps = [reply("", tool_call("run", command="rm -f /tmp/case.b64"))]
    steps += [
        reply("", tool_call("run", command=f"printf %s '{chunk}' >> /tmp/case.b64"))
        for chunk in chunks
    ]
    steps.append(
        reply(
            "",
            tool_call(
                "run", command=f"base64 -d /tmp/case.b64 | tar -xzf - -C {TASK_MOUNT} && echo ok"
            ),
        )
    )
    steps.append(reply("Submitting.", tool_call("submit", summary=name)))
    return steps


def shared_policy() -> Callable[[Sequence[BaseMessage]], AIMessage | str]:
    def respond(messages: Sequence[BaseMessage]) -> AIMessage | str:
        system = str(messages[0].content) if isinstance(messages[0], SystemMessage) else ""
        if "skilled terminal agent" in system:  # the solver
            return "I give up."
        brief = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        slot = int(re.search(r"proposal (\d+) of", brief).group(1)) - 1  # type: ignore[union-attr]
        steps = _proposer_steps(FLYWHEEL_CASES[slot % len(FLYWHEEL_CASES)])
        done = sum(isinstance(m, AIMessage) for m in messages)
        return steps[done] if done < len(steps) else "I stop here."

    return respond


POLICY = "scripted:hostile-shared"


def main(argv: list[str]) -> None:
    from tests.flywheel_policy import run_with_policy

    run_with_policy(POLICY, shared_policy(), argv)


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
