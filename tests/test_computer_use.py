"""Computer use (issue 30): a scripted proposer writes a desktop-GUI task (a Tk app on Xvfb, driven
by xdotool clicks) through the real proposer (MCP tools, a workspace sandbox, the full gate) and
the gate admits it; the same task whose reference solution clicks the lamps but never Save is
rejected by the real verifier, which reads only the state the app itself saved.

Only the model's replies are scripted (graphs/proposer/replay.py replays the seed's authoring).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.graphs.proposer.replay import replay_authoring
from autoenvscaling.tools.rollouts.store import RolloutStore

from .authoring import admitted_authoring, seeds_of
from .conftest import SEED_DIR

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

TASK = SEED_DIR / "tk-lamp-panel"


def test_the_pool_has_at_least_four_computer_use_seeds() -> None:
    tagged = seeds_of("computer-use")
    assert len(tagged) >= 4 and TASK.name in tagged, tagged
    # Both kinds: full-screen terminal programs through tmux, and GUI apps on a virtual display.
    assert any(name.startswith("tmux-") for name in tagged), tagged


async def test_a_scripted_proposer_gets_a_gui_task_admitted(
    engine_ready: str, tmp_path: Path
) -> None:
    await admitted_authoring(TASK, tmp_path)


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


async def test_the_served_solver_sets_the_lamps_with_desktop_tools(
    engine_ready: str, tmp_path: Path
) -> None:
    """The served solver on a computer-use task is bound the desktop tools; a scripted model that
    only looks (screenshot) and clicks (click) scores 1.0 in a real Harbor trial, and the store
    records each screenshot as the text the model read: its line, then `[image image/png]`."""
    from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
    from autoenvscaling.graphs.models import ModelConfig
    from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task

    env = TASK / "environment"
    now = (env / "lamps.txt").read_text().split()
    want = (env / "target.txt").read_text().split()
    clicks = [
        tool_call("click", x=50 + 60 * c, y=50 + 60 * r)
        for r in range(6)
        for c in range(6)
        if now[r][c] != want[r][c]
    ]
    start = "DISPLAY=:99 setsid python3 /opt/lamp-panel/lamp_panel.py >/dev/null 2>&1 </dev/null &"
    script = [
        reply("Start the display.", tool_call("screenshot")),
        reply("Open the panel.", tool_call("run", command=f"{start} sleep 2")),
        reply("Look at it.", tool_call("screenshot")),
        *(reply("Switch a lamp.", call) for call in clicks),
        reply("Save.", tool_call("click", x=40, y=422)),
        reply("Check.", tool_call("run", command="sleep 1; cat /app/lamps.txt")),
        "The lamps show the target pattern and are saved.",
    ]
    settings = SolverSettings(
        model=ModelConfig(model=register("lamps-by-clicks", script)),
        store_path=str(tmp_path / "rollouts.db"),
    )
    settings.budget.max_turns = len(script) + 1
    attempt = await solve_task(TASK, settings)
    assert attempt.reward == 1.0, attempt.model_dump_json(indent=1)
    with RolloutStore(tmp_path / "rollouts.db") as store:
        (trajectory,) = list(store.iter_trajectories(role="solver"))
    shots = [s.tool_output or "" for s in trajectory.steps if s.tool_name == "screenshot"]
    assert len(shots) == 2 and all(s.endswith("\n[image image/png]") for s in shots), shots
    assert shots[1].startswith("[screenshot 1024x768 PNG, ") and '"Lamp panel"' in shots[1]
    clicked = [s.tool_output or "" for s in trajectory.steps if s.tool_name == "click"]
    assert len(clicked) == len(clicks) + 1 and all("clicked left at" in c for c in clicked)
    assert "\n".join(want) in next(
        s.tool_output or "" for s in reversed(trajectory.steps) if s.tool_name == "run"
    )
