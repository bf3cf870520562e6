"""The exit status users expect (issue 32): a command whose attempts errored does not exit 0, the
codes have one meaning each (cli/exit_codes.py), `run --json` prints the run's summary, and
`validate --heldout` (the old name of `--decontam`) still works while saying so."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.exit_codes import ExitCode, exit_code_for
from autoenvscaling.cli.main import app
from autoenvscaling.graphs.agent.scripted_model import register

from .conftest import FIXTURES
from .flywheel_policy import shared_policy

runner = CliRunner()
# Everything but lint and decontam skipped: no sandbox, the flag is what is tested.
NO_TRIALS = [
    a
    for s in ("build", "oracle", "nop", "repeat", "anti_cheat", "calibrate", "dedup")
    for a in ("--skip", s)
]


def test_codes_have_one_meaning_and_infrastructure_wins():
    # 4: cannot run here (validate); 130: a run stopped by Ctrl-C (the shell's code for SIGINT)
    assert [int(c) for c in ExitCode] == [0, 1, 2, 3, 4, 130]
    assert exit_code_for([]) is ExitCode.OK
    assert exit_code_for(["task"]) is ExitCode.FAILED
    assert exit_code_for([None]) is ExitCode.FAILED  # an error nobody classified is still one
    assert exit_code_for(["task", "infrastructure"]) is ExitCode.INFRASTRUCTURE


@pytest.mark.timeout(300)
def test_trial_exits_non_zero_when_a_build_fails(engine_ready):
    """A task whose environment does not build: the trial errors (the task's fault), so the
    command exits 1 even though the other task scored; --json says whose fault each error is."""
    tasks = [str(FIXTURES / "good_task"), str(FIXTURES / "gate_tasks" / "build_fails")]
    result = runner.invoke(app, ["trial", *tasks, "--agent", "oracle", "--json"])
    assert result.exit_code == ExitCode.FAILED, result.output
    rows = {row["task_name"]: row for row in json.loads(result.stdout)}
    assert rows["good_task"]["reward"] == 1.0 and rows["good_task"]["fault"] is None
    assert rows["build_fails"]["error"] and rows["build_fails"]["fault"] == "task"


def test_validate_heldout_is_decontam_by_its_new_name():
    """`--heldout` means the evaluation set (`run --heldout`); validate's decontamination corpus
    is `--decontam`, as in `run`. The old spelling still works, with a warning."""
    task = str(FIXTURES / "gate_tasks" / "heldout_copy")
    corpus = str(FIXTURES / "gate_tasks" / "_heldout")
    new = runner.invoke(app, ["validate", task, *NO_TRIALS, "--decontam", corpus, "--json"])
    old = runner.invoke(app, ["validate", task, *NO_TRIALS, "--heldout", corpus, "--json"])
    for result in (new, old):
        (row,) = json.loads(result.stdout)
        assert (row["stage"], row["admitted"]) == ("decontam", False), row
        assert result.exit_code == ExitCode.FAILED
    assert "deprecated" in old.output and "--decontam" in old.output
    assert "deprecated" not in new.output
    assert "--heldout" not in runner.invoke(app, ["validate", "--help"]).output


def _run(run_dir, seed, model: str):
    return runner.invoke(
        app,
        [
            "run",
            "--run-dir",
            str(run_dir),
            "--model",
            model,
            "--seed-dir",
            str(seed),
            "--proposals",
            "0",
            "--no-train",
            "--refresh-attempts",
            "1",
            "--solver-max-turns",
            "3",
            "--json",
        ],
    )


@pytest.mark.timeout(600)
def test_run_json_prints_the_runs_summary(engine_ready, tmp_path):
    """One scripted round (no proposals, no training: the baseline and refresh attempts are the
    run's work): stdout is the summary, its exit status the command's. A run whose every
    attempt errored (a model that does not exist) no longer exits 0."""
    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")

    broken = _run(tmp_path / "broken", seed, "scripted:no-such-policy")
    summary = json.loads(broken.stdout)
    assert broken.exit_code == summary["exit_code"] == ExitCode.INFRASTRUCTURE, broken.output
    assert summary["rounds_done"] == 1 and summary["error"] is None
    # The baseline's and the refresh's attempt: no model answered, nobody's task was at fault.
    assert summary["errored"] == {"solver": {"infrastructure": 2}}

    run_dir = tmp_path / "run"
    result = _run(run_dir, seed, register("exit-codes-policy", shared_policy()))
    summary = json.loads(result.stdout)
    assert result.exit_code == summary["exit_code"] == ExitCode.OK, result.output
    assert summary["errored"] == {}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert summary["run_id"] == manifest["run_id"] and summary["run_dir"] == str(run_dir)
    assert summary["rounds_done"] == 1 and summary["rounds"][0]["round"] == 1
    assert summary["rounds"][0]["solver_attempts"] >= 1
    assert summary["error"] is None and summary["report"] == str(run_dir / "reports" / "run.md")
