"""The served solver runs as the task's agent user, as Harbor's trial and our GRPO episodes do.

A task states `[agent] user` to keep the agent unprivileged (the shared verifier is then safe to
train on: tools/trials/verifier.py shared_verifier_risk). Our solver reaches its sandbox through
the MCP terminal attached to the live container; before this test's fix that terminal opened
its shell as the image's user (root), so on a served attempt (calibration, refresh, the cheat
agent) the python3 forgery of test_shared_training scored 1.0 where the GRPO episode of the
same task scored 0, and the model was trained as one user and served as another.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from autoenvscaling.graphs.agent.loop import LoopBudget
from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
from tests.security.conftest import build_image, write_task
from tests.security.test_forgery import CHECK_PY, DOCKERFILE, TEST_SH
from tests.security.test_shared_training import FORGE

pytestmark = [pytest.mark.timeout(600)]


def test_the_served_solver_runs_as_the_tasks_agent_user(engine_ready, tmp_path: Path):
    image = build_image("forgery", DOCKERFILE)
    task = write_task(
        tmp_path,
        "shared-nobody",
        solve="#!/bin/bash\ntrue\n",
        test_sh=TEST_SH,
        tests={"check.py": CHECK_PY},
        mode="shared",
        image=image,
    )
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", '[agent]\nuser = "nobody"\n'))
    seen: list[str] = []
    script = [
        reply("", tool_call("run", command="id -un")),
        reply("", tool_call("run", command=FORGE[0])),
        "Done.",
    ]

    def respond(messages):
        seen.append(str(messages[-1].content))
        return script[len(seen) - 1]

    settings = SolverSettings(
        model=ModelConfig(model=register("agent-user-probe", respond)),
        budget=LoopBudget(max_turns=3),
    )
    attempt = asyncio.run(solve_task(task, settings, trials_dir=tmp_path / "trials"))
    assert "nobody" in seen[1] and "root" not in seen[1], seen[1]  # what the model read
    assert "Permission denied" in seen[2], seen[2]
    assert attempt.reward == 0.0, attempt
