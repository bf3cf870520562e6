"""Infrastructure is never difficulty: a flaky or dead model endpoint, behind a real HTTP proxy,
never retires a task, never penalises a proposer, and is counted apart in the round report.

The policy is a scripted OpenAI-compatible endpoint (the replies are the only scripted thing);
the flywheel calls it over HTTP through a proxy that answers 30% of calls with 500/503/429 —
or, in the second run, at a port where nothing listens. Sandboxes, gate and trials are real.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.builder import build_flywheel
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.tasks.pool import Pool

from .conftest import FIXTURES
from .flywheel_policy import shared_policy
from .openai_stub import FaultProxy, ScriptedEndpoint, closed_endpoint

pytestmark = pytest.mark.timeout(420)


def _context(tmp_path: Path, base_url: str) -> FlywheelContext:
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    return FlywheelContext(
        run_dir=str(tmp_path / "run"),
        rounds=1,
        proposals=1,
        arm="error_feedback",
        policy_model="openai:policy",
        policy_base_url=base_url,
        seed_dir=str(seed),
        train=False,
        max_revisions=0,
        refresh_attempts=2,
        baseline_tasks=1,
        baseline_attempts=2,
        calibration_rollouts=4,
        solver_max_turns=3,
        proposer_max_turns=4,
    )


async def _round(ctx: FlywheelContext) -> dict:
    graph = build_flywheel(checkpointer=InMemorySaver())
    return await graph.ainvoke(
        {"rounds": 1}, {"configurable": {"thread_id": "t"}, "recursion_limit": 500}, context=ctx
    )


def _attempts(run: Path):
    with RolloutStore(run / "rollouts.db") as store:
        return store.list_attempts(limit=10_000)


async def test_endpoint_down_round_completes_and_blames_no_one(engine_ready, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    ctx = _context(tmp_path, closed_endpoint())
    final = await _round(ctx)
    run = tmp_path / "run"

    # The proposer's model never answered: an infrastructure failure, not a -1.
    (record,) = [c for c in final["candidates"] if c.round == 1]
    assert record.infrastructure_error and record.proposer_reward is None
    assert not record.admitted

    # No task retired, and no made-up measurement: the seed task is exactly as it was.
    pool = Pool(run / "pool")
    (entry,) = pool.entries()
    assert entry.status == "active" and entry.history == []

    attempts = _attempts(run)
    solver = [a for a in attempts if a.role == "solver"]
    proposer = [a for a in attempts if a.role == "proposer"]
    assert len(solver) == 2 + 2  # baseline (1 task x 2) and refresh (1 task x 2)
    assert all(a.outcome == "error" and a.reward is None for a in solver + proposer)
    # Each failed model call was retried with backoff before giving up, and the retries recorded.
    assert all(a.metadata.get("model_retries") == 2 for a in solver)

    metrics = json.loads((run / "reports" / "metrics.json").read_text())[0]
    assert metrics["infrastructure_failures"] == 1 and metrics["scored"] == 0
    assert metrics["valid_environment_rate"] is None
    assert metrics["solver_infrastructure_failures"] == 4 and metrics["solver_attempts"] == 0
    assert metrics["solver_mean_reward_pool"] is None
    report = (run / "reports" / "round-01.md").read_text()
    assert "Infrastructure failures (excluded" in report
    assert "1 candidate(s), 4 solver attempt(s)" in report
    assert "kept unmeasured" in report
    # Nobody's behaviour is judged from replies that never came: the report says so instead.
    assert metrics["warnings"] == [
        "proposer: 1 attempt(s) got no model reply at all (stop reasons: error: 1)",
        "solver (baseline): 2 attempt(s) got no model reply at all (stop reasons: error: 2)",
        "solver (refresh): 2 attempt(s) got no model reply at all (stop reasons: error: 2)",
    ]


async def test_flaky_endpoint_round_completes_with_failures_counted_apart(
    engine_ready, tmp_path, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "none")
    with (
        ScriptedEndpoint(shared_policy()) as endpoint,
        FaultProxy(endpoint.base_url, rate=0.3, seed=7) as proxy,
    ):
        ctx = _context(tmp_path, proxy.base_url)
        final = await _round(ctx)
    run = tmp_path / "run"
    assert proxy.injected, "the proxy injected no fault: the test tested nothing"

    attempts = _attempts(run)
    solver = [a for a in attempts if a.role == "solver"]
    retries = sum(int(a.metadata.get("model_retries") or 0) for a in attempts)
    # Every injected fault was either retried (and recorded) or ended its attempt as an error.
    errors = [a for a in solver if a.outcome == "error"]
    assert retries + len(errors) >= 1
    assert all(a.reward is None for a in errors)
    assert all(a.reward is not None for a in solver if a.outcome in ("solved", "failed"))

    (record,) = [c for c in final["candidates"] if c.round == 1]
    if record.infrastructure_error:
        assert record.proposer_reward is None
    elif not record.admitted:  # judged on the valid rollouts only: calibration may say so
        assert (record.stage, record.proposer_reward) == ("calibrate", -0.25), record
    else:
        assert record.proposer_reward == 1.0

    # Calibration rollouts are recorded and linked to their candidate; errors carry no reward.
    calibration = [a for a in solver if a.metadata.get("purpose") == "calibration"]
    if not record.infrastructure_error:
        assert len(calibration) >= 4
        assert {a.metadata.get("candidate") for a in calibration} == {record.task_id}

    # Pool means are computed from valid attempts only; a retirement is a real measurement.
    pool = Pool(run / "pool")
    refresh = [a for a in solver if a.metadata.get("purpose") == "refresh"]
    for entry in pool.entries():
        valid = [
            a.reward
            for a in refresh
            if Path(a.task_id).name in (entry.task_id, Path(entry.task_id).name)
            and a.outcome != "error"
        ]
        measured = [p for p in entry.history if p.round == 1]
        if measured:
            assert measured[0].n == len(valid) and measured[0].n >= 1
        elif entry.status == "retired":
            pytest.fail(f"{entry.task_id} retired without a measurement")

    metrics = json.loads((run / "reports" / "metrics.json").read_text())[0]
    assert metrics["model_retries"] == retries
    assert metrics["solver_infrastructure_failures"] == sum(
        1 for a in solver if a.outcome == "error" and a.round in (0, 1)
    )
    assert metrics["solver_attempts"] == sum(
        1 for a in refresh if a.outcome != "error" and a.reward is not None
    )
    report = (run / "reports" / "round-01.md").read_text()
    assert f"model calls retried: {retries}" in report
