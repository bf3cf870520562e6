"""Professional work (issue 30): a scripted proposer writes an office-document task through the
real proposer (MCP tools, a workspace sandbox, the full gate) and the gate admits it; the same
task with a reference solution that writes totals as plain values instead of formulas is
rejected by the real verifier, which opens the workbook with openpyxl inside the sandbox.

Only the model's replies are scripted (graphs/proposer/replay.py replays the seed's authoring).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.graphs.proposer.replay import replay_authoring

from .authoring import admitted_authoring, seeds_of
from .conftest import SEED_DIR

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

TASK = SEED_DIR / "xlsx-expense-summary"


def test_the_pool_has_at_least_four_professional_work_seeds() -> None:
    tagged = seeds_of("professional-work")
    assert len(tagged) >= 4 and TASK.name in tagged, tagged


async def test_a_scripted_proposer_gets_a_spreadsheet_task_admitted(
    engine_ready: str, tmp_path: Path
) -> None:
    await admitted_authoring(TASK, tmp_path)


async def test_totals_written_as_values_are_rejected_at_the_oracle(
    engine_ready: str, tmp_path: Path
) -> None:
    """The negative twin: the instruction asks for formulas; a reference solution that stores
    the numbers fails its own verifier, so the gate says the oracle does not pass."""
    task = tmp_path / "tasks" / "xlsx-expense-values"
    shutil.copytree(TASK, task)
    solve = task / "solution" / "solve.sh"
    text = solve.read_text()
    formula = 'f"=SUMIF(Data!$C:$C,A{i},Data!$E:$E)"'
    assert formula in text
    values = 'sum(float(r["amount"]) for r in recs if r["department"] == dept)'
    solve.write_text(text.replace(formula, values))
    result = await replay_authoring(
        task, pool_dir=SEED_DIR, store_path=tmp_path / "rollouts.db", out_dir=tmp_path / "out"
    )
    assert not result.kept
    assert result.stage == "oracle", result.model_dump_json(indent=1)
