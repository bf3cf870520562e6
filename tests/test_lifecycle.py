"""One run lifecycle (graphs/lifecycle.py: `open_run`) for the command line, Studio and apps:
an app opens a run, streams it, is refused a second run in the same folder, resumes it for a
second round and is told when nothing is left, all through the public API the CLI uses."""

from __future__ import annotations

import json
import shutil

import pytest

from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.lifecycle import RunSetupError, open_run

from .conftest import FIXTURES
from .flywheel_policy import shared_policy

pytestmark = pytest.mark.timeout(600)


async def _run_to_the_end(**kwargs) -> list[str]:
    nodes: list[str] = []
    async with open_run(**kwargs) as opened:
        assert not opened.finished
        async for update in opened.astream():
            nodes += [n for n in update if not n.startswith("__")]
    return nodes


async def test_an_app_opens_a_run_resumes_it_and_is_told_when_nothing_is_left(
    engine_ready, tmp_path
):
    seed = tmp_path / "seed"
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    run_dir = tmp_path / "run"
    values = {
        "run_dir": run_dir,  # a Path, as an app holds it: the run's context keeps a string
        "rounds": 1,
        "proposals": 0,  # a round is the pool's refresh: one trial
        "policy_model": register("lifecycle-policy", shared_policy()),
        "seed_dir": seed,
        "train": False,
        "baseline_tasks": 0,
        "refresh_attempts": 1,
        "refresh_limit": 1,
        "solver_max_turns": 3,
    }
    said: list[str] = []

    nodes = await _run_to_the_end(values=values, notify=said.append)
    assert nodes[:2] == ["setup", "inspect"] and nodes[-1] == "refresh", nodes
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["config"]["run_dir"] == str(run_dir.resolve())
    assert manifest["config"]["policy_server"] == "none"  # a named model: nothing to start

    with pytest.raises(RunSetupError, match="already holds a run") as refused:
        async with open_run(values):
            pass
    assert refused.value.setting == "run_dir"

    nodes = await _run_to_the_end(values={**values, "rounds": 2}, resume=True, notify=said.append)
    assert "refresh" in nodes
    assert any("continuing with rounds 2..2" in line for line in said), said
    metrics = json.loads((run_dir / "reports" / "metrics.json").read_text())
    assert [m["round"] for m in metrics] == [1, 2]

    async with open_run({**values, "rounds": 2}, resume=True, notify=said.append) as opened:
        assert opened.finished
    assert "already finished 2 round(s)" in said[-1]


async def test_nothing_to_resume_names_the_run_folder(tmp_path):
    with pytest.raises(RunSetupError, match="nothing to resume") as refused:
        async with open_run({"run_dir": tmp_path / "empty"}, resume=True):
            pass
    assert refused.value.setting == "run_dir"
