"""Kernels on CPUs (issue 30): a scripted proposer writes a kernels task through the real
proposer (MCP tools, a workspace sandbox, the gate) and the gate admits it; the same task with a
reference solution that is correct but no faster than the reference kernel is rejected by the
real verifier's timing, at the oracle.

Only the model's replies are scripted (graphs/proposer/replay.py replays the seed's authoring).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.graphs.proposer.replay import replay_authoring
from autoenvscaling.tools.tasks.domains import folder_domain
from autoenvscaling.tools.trials.trial import run_trial

from .authoring import admitted_authoring
from .conftest import SEED_DIR

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

TASK = SEED_DIR / "histogram-edges-c"  # the quickest kernels seed at the gate (~1 min)


async def test_a_scripted_proposer_gets_a_kernels_task_admitted(
    engine_ready: str, tmp_path: Path
) -> None:
    candidate = await admitted_authoring(TASK, tmp_path)
    assert folder_domain(candidate) == "kernels"


async def test_a_correct_but_slow_reference_solution_is_rejected_at_the_oracle(
    engine_ready: str, tmp_path: Path
) -> None:
    """The speed check is real: a solution that fixes the counts but keeps the bin scan scores
    0 on its own verifier (about 1x, 5x required), so the gate says the oracle does not pass."""
    task = tmp_path / "tasks" / "histogram-edges-scan"
    shutil.copytree(TASK, task)
    solve = task / "solution" / "solve.sh"
    text = solve.read_text()
    start, end = text.index("cat > histogram.c <<'C'\n"), text.index("\nC\n")
    scan = (TASK / "tests" / "ref_histogram.c").read_text()
    solve.write_text(text[:start] + "cat > histogram.c <<'C'\n" + scan + text[end:])
    result = await replay_authoring(
        task, pool_dir=SEED_DIR, store_path=tmp_path / "rollouts.db", out_dir=tmp_path / "out"
    )
    assert not result.kept
    assert result.stage == "oracle", result.model_dump_json(indent=1)
    assert "the oracle scored 0" in result.reason
    # why: every count right, the timing wrong (the verifier's own lines, from a real trial)
    trial = await run_trial(task, agent="oracle", trials_dir=tmp_path / "trials")
    assert trial.reward == 0.0 and trial.error is None, trial.error
    assert "PASS: 4000 values, 5000 bins" in trial.verifier_output
    assert "FAIL: at least 5x faster than the reference" in trial.verifier_output
