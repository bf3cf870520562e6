"""`autoenvscaling validate`: the gate from the command line (real trials, real CLI app)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.main import app

from .conftest import FIXTURES

GATE_TASKS = FIXTURES / "gate_tasks"
runner = CliRunner()


def test_json_verdicts_for_each_task(engine_ready):
    tasks = [str(GATE_TASKS / "invalid_toml"), str(GATE_TASKS / "passes_initial_state")]
    result = runner.invoke(
        app, ["validate", *tasks, "--backend", "podman", "--skip", "calibrate", "--json"]
    )
    assert result.exit_code == 1, result.output  # a rejected task fails the command
    rows = json.loads(result.stdout)
    assert [r["task"] for r in rows] == tasks
    for row in rows:
        assert {"task", "admitted", "stage", "reason", "proposer_reward"} <= set(row)
        assert {"verifier_mode", "probes"} <= set(row)
        assert row["admitted"] is False and row["proposer_reward"] == -1.0
    assert [r["stage"] for r in rows] == ["lint", "nop"]
    assert "invalid TOML" in rows[0]["reason"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_json_names_the_verifier_mode_and_each_probe(engine_ready):
    """A seed whose tests run the agent's program: admitted, on the separate verifier, with the
    probes that aim at the agent's work run and passed (issue 28: validate --json shows them)."""
    seed = str(FIXTURES.parent.parent / "tasks" / "seed" / "logrotate-script")
    skips = [a for s in ("calibrate", "decontam", "dedup") for a in ("--skip", s)]
    result = runner.invoke(app, ["validate", seed, "--backend", "podman", *skips, "--json"])
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert row["admitted"] and row["verifier_mode"] == "separate", row
    for probe in ("program", "git", "customize", "stub", "forge"):
        assert row["probes"][probe]["passed"] is True, row["probes"]
    assert row["probes"]["program"]["skipped"] is False, row["probes"]["program"]


def test_table_output_and_admitted_exit_status():
    # Everything but lint skipped: fast, and an all-admitted run exits 0.
    skips = [
        a
        for s in ("build", "oracle", "nop", "repeat", "anti_cheat", "calibrate")
        for a in ("--skip", s)
    ]
    result = runner.invoke(app, ["validate", str(FIXTURES / "good_task"), *skips])
    assert result.exit_code == 0, result.output
    assert "good_task" in result.stdout and "admitted" in result.stdout


def test_unknown_stage_is_a_usage_error():
    result = runner.invoke(app, ["validate", str(FIXTURES / "good_task"), "--skip", "calibration"])
    assert result.exit_code == 2 and "unknown stage" in result.output
