"""Real Harbor trials on each engine: oracle, nop, and what an agent can and cannot touch."""

import asyncio
import json
import time

import pytest

from autoenvscaling.tools.trials.trial import run_trial, run_trials

from .conftest import ENGINES, FIXTURES, seed_tasks

SCRIPT_AGENT = "autoenvscaling.tools.trials.script_agent:ScriptAgent"


@pytest.mark.timeout(300)
async def test_oracle_and_nop_on_a_fixture_task(engine, tmp_path):
    task = FIXTURES / "good_task"
    oracle, nop = await asyncio.gather(
        run_trial(task, agent="oracle", backend=engine, trials_dir=tmp_path / "oracle"),
        run_trial(task, agent="nop", backend=engine, trials_dir=tmp_path / "nop"),
    )
    assert (oracle.reward, oracle.error) == (1.0, None)
    assert (nop.reward, nop.error) == (0.0, None)


@pytest.mark.timeout(300)
async def test_agent_phase_cannot_see_tests_or_solution_nor_forge_reward(engine, tmp_path):
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
        backend=engine,
        trials_dir=tmp_path,
        agent_kwargs={"commands": probe},
    )
    script = outcome.agent_metadata["script"]
    assert script[0]["stdout"].count("No such file or directory") == 2
    assert "logs-ok" in script[3]["stdout"]
    assert script[4]["stdout"].strip() == str(1024 * 1024 * 1024)
    assert outcome.reward == 0.0  # Harbor deletes stale reward files before the verifier runs


# On podman the gate's own seed-pool test (test_gate_seed.py) runs these same oracle and nop
# trials as its first stages; here they run on docker (the docker tier).
@pytest.mark.parametrize("engine", [ENGINES[1]], indirect=True)
@pytest.mark.slow
@pytest.mark.timeout(480)
async def test_seed_pool_oracle_solves_and_nop_fails_every_task(engine, tmp_path):
    tasks = seed_tasks()
    assert len(tasks) >= 12, "the seed pool must hold at least 12 tasks"
    started = time.monotonic()
    # Oracle and nop of every task, 3 trials at a time (images are built once, then cached).
    oracle, nop = await asyncio.gather(
        run_trials(tasks, agent="oracle", backend=engine, trials_dir=tmp_path / "o", concurrency=2),
        run_trials(tasks, agent="nop", backend=engine, trials_dir=tmp_path / "n", concurrency=1),
    )
    report = {
        o.task_name: (o.reward, n.reward, o.error or n.error)
        for o, n in zip(oracle, nop, strict=True)
    }
    assert all(r == (1.0, 0.0, None) for r in report.values()), json.dumps(report, indent=1)
    print(f"seed pool on {engine}: {2 * len(tasks)} trials in {time.monotonic() - started:.0f} s")
