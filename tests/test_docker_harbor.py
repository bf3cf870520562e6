"""Real Harbor trials on the docker backend: oracle, nop, hidden tests, and parity with bwrap."""
# ruff: noqa: F811  (pytest fixtures imported from test_docker_fixtures)

import json

import pytest

from autoenvscaling.tools.trials import run_trial, run_trials

from .conftest import FIXTURES, seed_tasks
from .test_docker_fixtures import docker_engine  # noqa: F401

pytestmark = pytest.mark.docker

SCRIPT_AGENT = "autoenvscaling.tools.script_agent:ScriptAgent"


async def test_oracle_and_nop_on_a_fixture_task(docker_engine, tmp_path):
    task = FIXTURES / "good_task"
    oracle = await run_trial(task, agent="oracle", backend="docker", trials_dir=tmp_path)
    nop = await run_trial(task, agent="nop", backend="docker", trials_dir=tmp_path)
    assert (oracle.reward, oracle.error) == (1.0, None)
    assert (nop.reward, nop.error) == (0.0, None)


async def test_agent_phase_cannot_see_tests_or_solution_nor_forge_reward(docker_engine, tmp_path):
    probe = [
        "ls /tests 2>&1; ls /solution 2>&1; echo probe-done",
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt",
        "echo '{\"reward\": 1}' > /logs/verifier/reward.json",
        "ls -d /logs/agent /logs/verifier && echo logs-ok",
        # task.toml asks for 1024 MB: the container's cgroup (v2 or v1) says so.
        "cat /sys/fs/cgroup/memory.max 2>/dev/null || "
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    outcome = await run_trial(
        FIXTURES / "good_task",
        agent=SCRIPT_AGENT,
        backend="docker",
        trials_dir=tmp_path,
        agent_kwargs={"commands": probe},
    )
    script = outcome.agent_metadata["script"]
    assert script[0]["stdout"].count("No such file or directory") == 2
    assert "logs-ok" in script[3]["stdout"]
    assert script[4]["stdout"].strip() == str(1024 * 1024 * 1024)
    assert outcome.reward == 0.0  # Harbor deletes stale reward files before the verifier runs


@pytest.mark.slow
async def test_seed_pool_oracle_solves_and_nop_fails_every_task(docker_engine, tmp_path):
    tasks = seed_tasks()
    assert tasks, "no seed tasks found"
    oracle = await run_trials(
        tasks, agent="oracle", backend="docker", trials_dir=tmp_path, concurrency=2
    )
    nop = await run_trials(tasks, agent="nop", backend="docker", trials_dir=tmp_path, concurrency=2)
    report = {
        o.task_name: (o.reward, n.reward, o.error or n.error)
        for o, n in zip(oracle, nop, strict=True)
    }
    assert all(r == (1.0, 0.0, None) for r in report.values()), json.dumps(report, indent=1)


@pytest.mark.slow
async def test_bwrap_and_docker_give_the_same_reward_for_every_seed_task(
    docker_engine, bwrap_ready, tmp_path
):
    tasks = [FIXTURES / "good_task", *seed_tasks()]
    rewards: dict[str, dict[str, tuple]] = {}
    for backend in ("bwrap", "docker"):
        for agent in ("oracle", "nop"):
            outcomes = await run_trials(
                tasks, agent=agent, backend=backend, trials_dir=tmp_path / backend, concurrency=2
            )
            for o in outcomes:
                rewards.setdefault(f"{o.task_name}/{agent}", {})[backend] = (o.reward, o.error)
    differ = {k: v for k, v in rewards.items() if v["bwrap"] != v["docker"]}
    assert not differ, json.dumps(differ, indent=1)
    assert all(v["docker"][1] is None for v in rewards.values()), json.dumps(rewards, indent=1)
