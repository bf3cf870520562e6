"""Every seed task passes every gate stage up to calibrate (and dedup against the rest of the
seed pool). Real trials for 17+ tasks: slow."""

from __future__ import annotations

import json

import pytest

from autoenvscaling.graphs.validation.builder import validate_batch
from autoenvscaling.tools.gate import GateConfig

from .conftest import FIXTURES, SEED_DIR, seed_tasks


@pytest.mark.slow
# ~130 trials, each with a second container for the separate verifier: > 10 min under load.
@pytest.mark.timeout(1800)
async def test_every_seed_task_passes_the_gate_up_to_calibrate(engine_ready):
    tasks = seed_tasks()
    assert tasks, "tasks/seed/ holds no task"
    config = GateConfig(
        skip=["calibrate"],
        pool_dir=SEED_DIR,
        concurrency=2,
        trial_concurrency=4,
        heldout_dirs=[FIXTURES / "gate_tasks" / "_heldout"],
    )
    verdicts = await validate_batch(tasks, config)
    rejected = {v.task_name: f"{v.stage}: {v.reason}" for v in verdicts if not v.admitted}
    assert not rejected, json.dumps(rejected, indent=1)
    assert len(verdicts) == len(tasks)
    for verdict in verdicts:
        assert verdict.skipped == ["calibrate"], verdict.summary()
