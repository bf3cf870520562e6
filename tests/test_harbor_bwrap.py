"""Real Harbor trials on the bwrap backend: oracle, nop, and what an agent can and cannot touch."""

import json

import pytest

from autoenvscaling.tools.trials import run_trial, run_trials

from .conftest import FIXTURES, seed_tasks

SCRIPT_AGENT = "autoenvscaling.tools.script_agent:ScriptAgent"


async def test_oracle_and_nop_on_a_fixture_task(bwrap_ready, tmp_path):
    task = FIXTURES / "good_task"
    oracle = await run_trial(task, agent="oracle", trials_dir=tmp_path)
    nop = await run_trial(task, agent="nop", trials_dir=tmp_path)
    assert (oracle.reward, oracle.error) == (1.0, None)
    assert (nop.reward, nop.error) == (0.0, None)


async def test_agent_phase_cannot_see_tests_or_solution_nor_forge_reward(bwrap_ready, tmp_path):
    probe = [
        "ls /tests 2>&1; ls /solution 2>&1; echo probe-done",
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt",
        "echo '{\"reward\": 1}' > /logs/verifier/reward.json",
    ]
    outcome = await run_trial(
        FIXTURES / "good_task",
        agent=SCRIPT_AGENT,
        trials_dir=tmp_path,
        agent_kwargs={"commands": probe},
    )
    seen = outcome.agent_metadata["script"][0]["stdout"]
    assert "No such file or directory" in seen and seen.count("No such file") == 2
    # Harbor deletes stale reward files before it runs the verifier: the forgery is gone.
    assert outcome.reward == 0.0


@pytest.mark.slow
async def test_seed_pool_oracle_solves_and_nop_fails_every_task(bwrap_ready, tmp_path):
    tasks = seed_tasks()
    assert len(tasks) >= 12, "the seed pool must hold at least 12 tasks"
    oracle = await run_trials(tasks, agent="oracle", trials_dir=tmp_path, concurrency=2)
    nop = await run_trials(tasks, agent="nop", trials_dir=tmp_path, concurrency=2)
    report = {
        o.task_name: (o.reward, n.reward, o.error or n.error)
        for o, n in zip(oracle, nop, strict=True)
    }
    assert all(r == (1.0, 0.0, None) for r in report.values()), json.dumps(report, indent=1)
