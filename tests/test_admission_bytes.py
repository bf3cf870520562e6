"""Admission is bound to bytes: the gate's final check hashes the candidate, admission freezes a
copy and proves it holds those bytes, the pool receives exactly that copy (hash in pool.json and
in the verdict), and a candidate edited after it was submitted is rejected."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.admission import run_gate
from autoenvscaling.graphs.flywheel.state import AdmitItem
from autoenvscaling.graphs.models import ModelConfig, Policy
from autoenvscaling.graphs.proposer.settings import ProposalResult
from autoenvscaling.tools.agents.brief import ProposerBrief
from autoenvscaling.tools.gate import GateConfig, validate_task
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.run_dir import RunDir
from autoenvscaling.tools.tasks.pool import Pool, PoolEntry, PoolError
from autoenvscaling.tools.tasks.snapshot import content_hash

from .conftest import FIXTURES

pytestmark = pytest.mark.timeout(120)

# The stages that need sandboxes are not what this test is about; lint, decontam, dedup run.
TRIAL_STAGES = ["build", "oracle", "nop", "repeat", "anti_cheat"]


async def _submitted(tmp_path: Path) -> tuple[RunDir, FlywheelContext, AdmitItem]:
    run = RunDir(tmp_path / "run")
    ctx = FlywheelContext(run_dir=str(run.root), calibrate=False)
    run.create({})
    candidate = run.candidates(1) / "cand-0"
    shutil.copytree(FIXTURES / "good_task", candidate)
    verdict = await validate_task(candidate, GateConfig(skip=TRIAL_STAGES), skip=())
    assert verdict.admitted and verdict.content_hash == content_hash(candidate)
    with RolloutStore(run.rollouts) as store:
        store.start_attempt(id="p-1", task_id="cand-0", role="proposer", run_id="r", round=1)
    item = AdmitItem(
        round=1,
        slot=0,
        run_id="r",
        policy=Policy(),
        brief=ProposerBrief(),
        candidate=ProposalResult(
            candidate=str(candidate),
            attempt_id="p-1",
            arm="terminal",
            solver_feedback=True,
            admitted=True,
            reward=1.0,
            outcome="solved",
            verdict=verdict,
        ),
    )
    return run, ctx, item


async def test_pool_receives_exactly_the_checked_bytes(tmp_path: Path) -> None:
    run, ctx, item = await _submitted(tmp_path)
    record = await run_gate(ctx, run, item, ModelConfig())
    assert record.admitted, record.reason
    assert item.candidate.verdict is not None
    checked = item.candidate.verdict.content_hash
    assert record.content_hash == checked
    frozen = Path(record.snapshot)
    assert frozen != Path(item.candidate.candidate) and content_hash(frozen) == checked
    # The verdict on disk names the bytes and keeps every stage of the final full check.
    verdict = json.loads(Path(item.candidate.candidate + ".verdict.json").read_text())
    assert verdict["content_hash"] == checked
    assert [s["stage"] for s in verdict["stages"]] == [
        "lint",
        "build",
        "oracle",
        "nop",
        "repeat",
        "anti_cheat",
        "decontam",
        "calibrate",
        "dedup",
    ]
    pool = Pool(run.pool)
    entry = pool.add(frozen, PoolEntry(task_id=record.task_id, content_hash=record.content_hash))
    saved = json.loads((run.pool / "pool.json").read_text())["entries"][record.task_id]
    assert saved["content_hash"] == entry.content_hash == checked
    assert content_hash(pool.path(record.task_id)) == checked


async def test_candidate_edited_after_submit_is_rejected(tmp_path: Path) -> None:
    run, ctx, item = await _submitted(tmp_path)
    candidate = Path(item.candidate.candidate)
    # After its final check passed, something in the proposer's workspace rewrites the tests.
    (candidate / "tests" / "test.sh").write_text(
        "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"
    )
    record = await run_gate(ctx, run, item, ModelConfig())
    assert not record.admitted and record.stage == "changed_after_submit"
    assert record.proposer_reward == -1.0 and "edited after it was submitted" in record.reason
    assert record.snapshot is None
    with RolloutStore(run.rollouts) as store:
        assert store.get_attempt("p-1").reward == -1.0


async def test_gate_rejects_a_folder_that_changes_while_checked(tmp_path: Path) -> None:
    candidate = tmp_path / "cand"
    shutil.copytree(FIXTURES / "good_task", candidate)
    seen = []

    def tamper(result) -> None:  # runs between stages, as a live workspace could
        seen.append(result.stage)
        if result.stage == "lint":
            (candidate / "instruction.md").write_text("changed mid-check\n")

    verdict = await validate_task(
        candidate, GateConfig(skip=TRIAL_STAGES), skip=(), on_stage=tamper
    )
    assert seen and not verdict.admitted and "changed while the gate checked" in verdict.reason


def test_pool_refuses_bytes_other_than_the_admitted_ones(tmp_path: Path) -> None:
    source = tmp_path / "task"
    shutil.copytree(FIXTURES / "good_task", source)
    digest = content_hash(source)
    (source / "instruction.md").write_text("swapped\n")
    with pytest.raises(PoolError, match="changed between admission and copy"):
        Pool(tmp_path / "pool").add(source, PoolEntry(task_id="t", content_hash=digest))
    assert not (tmp_path / "pool" / "t").exists()
