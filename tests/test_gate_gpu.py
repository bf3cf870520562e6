"""A GPU task at a gate without a GPU (issue 30): the real gate does not run it and does not fail
it; the verdict says it needs a GPU and how to give the gate one. No sandbox starts: lint decides.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.exit_codes import ExitCode
from autoenvscaling.cli.main import app
from autoenvscaling.graphs.validation.builder import validate_batch
from autoenvscaling.tools.gate import GateConfig
from autoenvscaling.tools.gate.gpu import MAX_GPUS_PER_TASK
from autoenvscaling.tools.gate.pipeline import run_stage, validate_task

from .conftest import SEED_DIR

GPU_TASK = SEED_DIR.parent / "gpu" / "rmsnorm-triton"
REMEDY = ("AUTOENVSCALING_TASK_MAX_GPUS=1", "--backend harbor-docker", "harbor:modal")


def _assert_needs_gpu(verdict, *why: str) -> None:
    assert not verdict.admitted and verdict.needs_gpus == 1, verdict.summary()
    assert verdict.stage == "lint" and [s.stage for s in verdict.stages] == ["lint"]
    # not judged: no proposer reward, counted as infrastructure (exit 3), never as the task's fault
    assert verdict.proposer_reward is None and verdict.infrastructure_error
    assert verdict.reason.startswith("needs a GPU: task.toml asks for 1 GPU (gpus = 1)")
    assert "infrastructure failure" not in verdict.reason
    for text in (*REMEDY, *why):
        assert text in verdict.reason, (text, verdict.reason)
    assert verdict.summary().startswith("rmsnorm-triton: not judged: needs a GPU")


@pytest.mark.timeout(120)
async def test_a_gpu_task_on_a_cpu_only_gate_needs_a_gpu(monkeypatch):
    monkeypatch.delenv("AUTOENVSCALING_TASK_MAX_GPUS", raising=False)
    verdict = await validate_task(GPU_TASK, GateConfig())
    _assert_needs_gpu(verdict, "its limits allow 0", "its podman backend passes no GPU")
    # the graph the flywheel and `validate` run says the same
    (batched,) = await validate_batch([GPU_TASK], GateConfig())
    _assert_needs_gpu(batched)


@pytest.mark.timeout(120)
async def test_limits_that_allow_gpus_do_not_make_podman_have_one(monkeypatch):
    monkeypatch.setenv("AUTOENVSCALING_TASK_MAX_GPUS", "2")
    verdict = await validate_task(GPU_TASK, GateConfig())
    _assert_needs_gpu(verdict, "its podman backend passes no GPU")
    assert "its limits allow" not in verdict.reason


@pytest.mark.timeout(120)
async def test_a_broken_gpu_task_is_rejected_for_what_is_wrong_with_it(tmp_path: Path):
    """The GPU is not an excuse: a lint error of the task's own is still a rejection."""
    task = tmp_path / "broken-gpu"
    shutil.copytree(GPU_TASK, task)
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho checked\n")
    verdict = await validate_task(task, GateConfig())
    assert not verdict.admitted and verdict.needs_gpus == 0 and not verdict.infrastructure_error
    assert verdict.stage == "lint" and verdict.proposer_reward == -1.0
    # the task's own error leads; the GPU it would also need is said after it
    assert verdict.reason.startswith("tests/test.sh: [") and "reward" in verdict.reason
    assert "besides, task.toml asks for 1 GPU" in verdict.reason
    assert "needs a GPU" not in verdict.reason


@pytest.mark.timeout(120)
def test_validate_cli_says_needs_a_gpu_and_exits_4(monkeypatch):
    monkeypatch.delenv("AUTOENVSCALING_TASK_MAX_GPUS", raising=False)
    result = CliRunner().invoke(app, ["validate", str(GPU_TASK), "--json"])
    assert result.exit_code == ExitCode.CANNOT_RUN_HERE, result.output
    (row,) = json.loads(result.stdout)
    assert row["kind"] == "cannot_run_here" and row["missing"][0]["need"] == "gpus"
    assert row["needs_gpus"] == 1 and row["proposer_reward"] is None
    assert row["reason"].startswith("needs a GPU")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("backend", ["harbor-docker", "harbor:modal"])
async def test_the_named_remedy_lets_lint_pass(monkeypatch, backend: str):
    """What the verdict says to do is enough for the static stage: with GPUs allowed and a
    backend that passes them through, lint admits the task and the trials go to that backend."""
    monkeypatch.setenv("AUTOENVSCALING_TASK_MAX_GPUS", "1")
    result = await run_stage("lint", GPU_TASK.resolve(), GateConfig(backend=backend), {})
    assert result.passed and not result.infrastructure_error, result.reason
    assert result.details.get("status") != "needs_gpu"


@pytest.mark.timeout(120)
async def test_more_gpus_than_a_machine_holds_is_a_limit_not_a_need(tmp_path: Path):
    task = tmp_path / "greedy-gpu"
    shutil.copytree(GPU_TASK, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 1", f"gpus = {MAX_GPUS_PER_TASK + 1}"))
    verdict = await validate_task(task, GateConfig())
    assert not verdict.admitted and verdict.needs_gpus == 0 and not verdict.infrastructure_error
    assert verdict.proposer_reward == -1.0 and "environment.gpus" in verdict.reason


@pytest.mark.timeout(300)
async def test_asking_for_a_gpu_does_not_spare_a_proposer_its_rejection(
    tmp_path: Path, monkeypatch
):
    """Attack: a proposer adds `gpus = 1` to a task whose oracle fails. Not judged would give
    it no reward where the honest task gets -1, so a policy would learn to ask for GPUs. Driven
    through the real proposer (its MCP tools, workspace sandbox and gate; scripted replies)."""
    from autoenvscaling.graphs.proposer.replay import replay_authoring
    from autoenvscaling.tools.rollouts.store import RolloutStore

    from .conftest import FIXTURES

    monkeypatch.delenv("AUTOENVSCALING_TASK_MAX_GPUS", raising=False)
    task = tmp_path / "broken-with-gpu"
    shutil.copytree(FIXTURES / "good_task", task)
    toml = (task / "task.toml").read_text()
    assert "[environment]" in toml
    (task / "task.toml").write_text(toml.replace("[environment]", "[environment]\ngpus = 1", 1))
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho 'no work done'\n")
    store = tmp_path / "rollouts.db"
    result = await replay_authoring(
        task, pool_dir=SEED_DIR, store_path=store, out_dir=tmp_path / "out"
    )
    assert not result.kept and "needs a GPU" in result.reason, result
    assert "counts as a rejection" in result.reason
    with RolloutStore(store) as rollouts:
        (attempt,) = [t.attempt for t in rollouts.iter_trajectories(role="proposer")]
    assert attempt.reward == -1.0 and attempt.outcome == "failed", attempt
