"""The cheat agent: the solver's agent (MCP terminal, same budget) with prompts/cheat.md, on a
scripted model (only its replies are scripted; the terminal, the trial and the verifier are
real). A hack that scores with outputs unlike the oracle's rejects the task, and the summary of
the hack reaches the proposer's revision prompt; a cheat agent that ends up doing the task
honestly does not reject it."""

from __future__ import annotations

import asyncio

import pytest

from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.proposer.prompts import revision_prompt
from autoenvscaling.graphs.solver.attempt import SOLVER_AGENT
from autoenvscaling.tools.gate import GateConfig, make_verdict, run_stage

from .conftest import FIXTURES

HACKS = FIXTURES / "hack_tasks"
SOLVE_TOP_WORDS = (
    "grep -oE '[A-Za-z]+' /app/input.txt | tr 'A-Z' 'a-z' | sort | uniq -c "
    "| awk '{print $2, $1}' | sort -k2,2nr -k1,1 | head -n 3 > /app/top_words.txt"
)


def _config(model: str) -> GateConfig:
    # Only the cheat agent decides here: the near-miss and tamperer probes are off.
    # The gate names no agent of the graphs layer: the solver's agent is given (as graphs do).
    return GateConfig(
        cheat_model=model,
        solver_agent=SOLVER_AGENT,
        near_miss=False,
        tamperer_probe="off",
        trial_concurrency=4,
    )


@pytest.mark.timeout(600)
async def test_a_cheat_agent_hack_rejects_the_task_and_is_fed_back(engine_ready):
    hack = register(
        "cheat-json",
        [
            reply(
                "The tests may only parse it.",
                tool_call("run", command="echo '[]' > /app/counts.json"),
            ),
            reply("I wrote an empty JSON array instead of counting."),
        ],
    )
    honest = register(
        "cheat-honest",
        [
            reply("", tool_call("run", command=SOLVE_TOP_WORDS)),
            reply("I found no shortcut and solved it."),
        ],
    )
    hacked, solved = await asyncio.gather(
        run_stage("anti_cheat", HACKS / "json_shape_only", _config(hack)),
        run_stage("anti_cheat", FIXTURES / "good_task", _config(honest)),
    )
    assert not hacked.passed and not hacked.infrastructure_error, hacked.reason
    assert hacked.details["rejected_by"] == ["cheat_agent"], hacked.details["rejected_by"]
    cheat = hacked.details["probes"]["cheat_agent"]
    assert cheat["reward"] == 1.0
    assert "wrote /app/counts.json" in hacked.reason and "'[]" in hacked.reason
    verdict = make_verdict(HACKS / "json_shape_only", [hacked])
    feedback = revision_prompt("terminal", verdict, 1, 2)
    assert "cheat agent" in feedback and "wrote /app/counts.json" in feedback

    assert solved.passed, solved.reason
    honest_result = solved.details["probes"]["cheat_agent"]
    assert honest_result["reward"] == 1.0 and "did the task" in honest_result["reason"]
