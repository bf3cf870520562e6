"""Computer use (issue 30): a scripted proposer writes a desktop-GUI task (a Tk app on Xvfb, driven
by xdotool clicks) through the real proposer (MCP tools, a workspace sandbox, the full gate) and
the gate admits it; the same task whose reference solution clicks the lamps but never Save is
rejected by the real verifier, which reads only the state the app itself saved.

Only the model's replies are scripted (graphs/proposer/replay.py replays the seed's authoring).
"""

from __future__ import annotations

import shutil
import tomllib
from pathlib import Path

import pytest

from autoenvscaling.graphs.proposer.replay import authoring_files, replay_authoring
from autoenvscaling.tools.rollouts.store import RolloutStore

from .conftest import SEED_DIR, seed_tasks

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

TASK = SEED_DIR / "tk-lamp-panel"
DOMAIN = "computer-use"


def test_the_pool_has_at_least_four_computer_use_seeds() -> None:
    tagged = [
        t.name
        for t in seed_tasks()
        if tomllib.loads((t / "task.toml").read_text())["metadata"]["tags"][:1] == [DOMAIN]
    ]
    assert len(tagged) >= 4 and TASK.name in tagged, tagged
    # Both kinds: full-screen terminal programs through tmux, and GUI apps on a virtual display.
    assert any(name.startswith("tmux-") for name in tagged), tagged


async def test_a_scripted_proposer_gets_a_gui_task_admitted(
    engine_ready: str, tmp_path: Path
) -> None:
    result = await replay_authoring(
        TASK, pool_dir=SEED_DIR, store_path=tmp_path / "rollouts.db", out_dir=tmp_path / "out"
    )
    assert result.kept, result.model_dump_json(indent=1)
    assert result.reason.startswith("admitted")
    # What the gate admitted is what the proposer's tool calls wrote, file for file.
    assert result.attempt_id is not None
    candidate = tmp_path / "out" / f"cand-{result.attempt_id[:12]}"
    assert sorted(authoring_files(candidate)) == sorted(authoring_files(TASK))
    with RolloutStore(tmp_path / "rollouts.db") as store:
        (attempt,) = [t.attempt for t in store.iter_trajectories(role="proposer")]
    assert attempt.reward == 1.0 and attempt.metadata["admitted"] is True


async def test_lamps_set_but_never_saved_are_rejected_at_the_oracle(
    engine_ready: str, tmp_path: Path
) -> None:
    """The negative twin: the reference solution clicks every lamp right but not Save, so the
    app never writes its state; the gate says the oracle does not pass."""
    task = tmp_path / "tasks" / "tk-lamp-panel-unsaved"
    shutil.copytree(TASK, task)
    solve = task / "solution" / "solve.sh"
    text = solve.read_text()
    save = "click(40, 422)  # Save"
    assert save in text
    solve.write_text(text.replace(save, "pass"))
    result = await replay_authoring(
        task, pool_dir=SEED_DIR, store_path=tmp_path / "rollouts.db", out_dir=tmp_path / "out"
    )
    assert not result.kept
    assert result.stage == "oracle", result.model_dump_json(indent=1)
