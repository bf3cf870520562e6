"""Generated tasks pass the gate: a sample of the shipped splits' variants (one per family,
taken from the pool seed and the held-out split in turn) through every stage up to calibrate,
oracle 1.0 and nop 0.0 among them. Real trials: slow."""

from __future__ import annotations

import json

import pytest

from autoenvscaling.graphs.config import REPO_TASKS
from autoenvscaling.graphs.validation.builder import validate_batch
from autoenvscaling.tools.gate import GateConfig
from autoenvscaling.tools.tasks.families import SKILL_FAMILIES

from .conftest import FIXTURES

GENERATED = REPO_TASKS / "generated"


def sample() -> list:
    """One variant of each family, alternating between the pool seed and the held-out split."""
    splits = [GENERATED / "pool", GENERATED / "heldout"]
    return [
        next(p for p in sorted(splits[i % 2].iterdir()) if p.name.startswith(f"{family}-"))
        for i, family in enumerate(SKILL_FAMILIES)
    ]


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_a_sample_of_generated_variants_passes_the_gate(engine_ready):
    tasks = sample()
    assert len(tasks) == len(SKILL_FAMILIES)
    config = GateConfig(
        skip=["calibrate"],
        concurrency=2,
        trial_concurrency=4,
        heldout_dirs=[FIXTURES / "gate_tasks" / "_heldout"],
    )
    verdicts = await validate_batch(tasks, config)
    rejected = {v.task_name: f"{v.stage}: {v.reason}" for v in verdicts if not v.admitted}
    assert not rejected, json.dumps(rejected, indent=1)
    for verdict in verdicts:
        stages = {s.stage: s for s in verdict.stages}
        assert stages["oracle"].passed and stages["nop"].passed, verdict.summary()
        # calibrate: no solver here; dedup: no pool given (the splits' check covers it).
        assert set(verdict.skipped) <= {"calibrate", "dedup"}, verdict.summary()
