"""Our stages where there is no live sandbox to attach to (any Harbor environment type): the
solver's terminal runs over the environment's `exec` with the terminal's behaviour, in a real trial
scored by the task's own verifier."""

from __future__ import annotations

import pytest

from autoenvscaling.graphs.agent_loop import LoopBudget
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.solver_attempt import SolverSettings, solve_task
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.sandbox.harbor_backends import check_stages, offers

from .conftest import FIXTURES
from .exec_only_env import exec_only_backend

TASK = FIXTURES / "good_task"
SOLVE = (TASK / "solution" / "solve.sh").read_text()


@pytest.mark.timeout(300)
async def test_solver_attempt_over_exec_keeps_state_and_is_scored(
    engine_ready, tmp_path, monkeypatch
):
    backend = exec_only_backend(monkeypatch)
    assert "attach" not in offers(backend)
    check_stages(backend, ["solve", "propose", "gate:calibrate/our_solver"])  # none refused
    model = register(
        "exec-solver",
        [
            reply("", tool_call("run", command="cd /tmp && export WHERE=here")),
            reply("", tool_call("run", command="pwd; echo $WHERE; whoami")),
            reply("", tool_call("run", command="echo begin; sleep 3; echo end", timeout_sec=1)),
            reply("", tool_call("read_output", timeout_sec=20)),
            reply("", tool_call("run", command=f"cd /app && {SOLVE}")),
            "Done.",
        ],
    )
    settings = SolverSettings(
        model=ModelConfig(model=model),
        store_path=str(tmp_path / "rollouts.db"),
        run_id="exec",
        budget=LoopBudget(max_turns=8),
    )
    attempt = await solve_task(TASK, settings, backend=backend, trials_dir=tmp_path)
    assert (attempt.reward, attempt.outcome, attempt.steps) == (1.0, "solved", 5), attempt.error
    with RolloutStore(tmp_path / "rollouts.db") as store:
        steps = [s for s in store.trajectory(attempt.rollout_id).steps if s.tool_name]
    assert steps[1].tool_output.startswith("/tmp\nhere\nroot\n")  # cwd and exports carried
    assert "begin" in steps[2].tool_output and "still running" in steps[2].tool_output
    assert "end" in steps[3].tool_output and steps[3].exit_code == 0
