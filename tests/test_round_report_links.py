"""The round report links each candidate to its folder, its verdicts, the trial folders the gate
ran for it and its rollouts: a scripted-model flywheel run (real gate, real Harbor trials, real
store), every link resolving inside the run folder."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoenvscaling.tools.rollouts.store import RolloutStore

from .test_export import _scripted_run

LINK = re.compile(r"\]\(<([^>]+)>\)")


def _sections(report: str) -> dict[str, str]:
    """task id -> its block of the "Candidates" section."""
    body = report.split("## Candidates", 1)[1]
    blocks = re.split(r"^### ", body, flags=re.M)[1:]
    return {block.split(":", 1)[0]: block for block in blocks}


def _trial_task(trial: Path) -> str:
    """The name of the task folder a Harbor trial ran (its own config.json): the candidate, or
    its frozen copy under snapshots/ (same name)."""
    config = json.loads((trial / "config.json").read_text())
    return Path(config["task"]["path"]).name


@pytest.mark.timeout(900)
async def test_round_report_links_resolve_to_each_candidates_own_files(tmp_path):
    from autoenvscaling.cli.main import app

    run = await _scripted_run(tmp_path)
    reports = run / "reports"
    report = (reports / "round-01.md").read_text()
    links = LINK.findall(report)
    assert links, report
    for target in links:
        assert (reports / target).exists(), f"dangling link {target}"
        assert (reports / target).resolve().is_relative_to(run.resolve()), target

    sections = _sections(report)
    candidates = sorted((run / "candidates" / "r01").glob("*.verdict.json"))
    assert len(sections) == 2 and candidates  # two proposals, at least one judged
    judged = 0
    for task_id, block in sections.items():
        name = task_id.removeprefix("r01-")
        targets = LINK.findall(block)
        assert f"../candidates/r01/{name}" in targets
        verdict = f"../candidates/r01/{name}.verdict.json"
        if (reports / verdict).exists():
            judged += 1
            assert verdict in targets
        trials = [reports / t for t in targets if t.startswith("../trials/")]
        if "admitted" in block.split("\n", 1)[0]:
            # lint..calibrate ran on it: build/oracle/nop/repeat/anti-cheat and calibration trials
            assert len(trials) >= 6, block
            assert any("calibrate-" in str(t) for t in trials), block
        for trial in trials:  # each trial ran this candidate (or the frozen copy of it)
            assert (trial / "result.json").is_file(), trial
            assert _trial_task(trial) == name, trial

        # Rollouts: the ids are in the store, and the printed command selects exactly those.
        ids = (
            re.findall(r"`([0-9a-f-]{8,})`", block.split("- rollouts", 1)[1])
            if ("- rollouts" in block)
            else []
        )
        assert ids, block  # at least the proposer's own attempt
        with RolloutStore(run / "rollouts.db") as store:
            for attempt_id in ids:
                assert store.get_attempt(attempt_id).id == attempt_id
        command = re.findall(r"`(autoenvscaling export rollouts [^`]+)`", block)
        assert len(command) == 1, block
        out = tmp_path / f"{name}.jsonl"
        args = [*shlex.split(command[0])[1:], "--out", str(out)]
        # The CLI runs its own event loop: call it from a thread, as a shell would.
        result = await asyncio.to_thread(CliRunner().invoke, app, args)
        assert result.exit_code == 0, result.output
        exported = [json.loads(line)["id"] for line in out.read_text().splitlines()]
        assert sorted(exported) == sorted(ids)
    assert judged >= 1
    assert any(": admitted" in block.split("\n", 1)[0] for block in sections.values())
