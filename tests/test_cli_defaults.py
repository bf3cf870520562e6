"""`validate --calibrate-policy` calibrates with our solver agent on the given model and says in
--json which model answered (with no --model it would start the embedded default, as `run`)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.main import app
from autoenvscaling.graphs.agent.scripted_model import register

from .conftest import FIXTURES
from .flywheel_policy import shared_policy


@pytest.mark.timeout(600)
def test_validate_calibrates_with_the_policy_and_names_it(engine_ready):
    model = register("calibration-policy", shared_policy())
    skips = [a for s in ("repeat", "anti_cheat", "decontam", "dedup") for a in ("--skip", s)]
    result = CliRunner().invoke(
        app,
        [
            "validate",
            str(FIXTURES / "good_task"),
            "--calibrate-policy",
            "--model",
            model,
            *skips,
            "--json",
        ],
    )
    rows = json.loads(result.stdout)
    assert rows[0]["calibration_model"] == model
    # The scripted solver never counts words: every rollout fails, so calibration rejects it.
    assert (rows[0]["stage"], rows[0]["admitted"]) == ("calibrate", False), rows[0]
    assert "too hard" in rows[0]["reason"]
    assert result.exit_code == 1


def test_calibrate_policy_and_solver_are_exclusive():
    result = CliRunner().invoke(
        app,
        ["validate", str(FIXTURES / "good_task"), "--calibrate-policy", "--solver", "oracle"],
    )
    text = " ".join(result.output.replace("│", " ").split())
    assert result.exit_code == 2 and "pick one" in text
