"""The gate's pure logic: config, verdicts and rewards, stage bookkeeping, the static stages,
and the helpers the anti_cheat probes rely on. No sandbox needed."""

from __future__ import annotations

import shutil

import pytest
from pydantic import ValidationError

from autoenvscaling.tools.gate import (
    STAGES,
    GateConfig,
    StageResult,
    make_verdict,
    run_stage,
)
from autoenvscaling.tools.gate.anti_cheat.probes import hidden_files, named_in_instruction
from autoenvscaling.tools.gate.anti_cheat.stage import executed_image_files
from autoenvscaling.tools.gate.calibrate import near_edge
from tests.scheduled_agent import next_attempt

from .conftest import FIXTURES

GATE_TASKS = FIXTURES / "gate_tasks"


def passed(stage, **kw) -> StageResult:
    return StageResult(stage=stage, passed=True, reason="ok", **kw)


def test_stage_order_is_the_architecture_table():
    assert STAGES == (
        "lint",
        "build",
        "oracle",
        "nop",
        "repeat",
        "anti_cheat",
        "decontam",
        "calibrate",
        "dedup",
    )


def test_config_defaults_and_validation(monkeypatch):
    config = GateConfig()
    assert (config.repeat, config.nop_threshold, config.band) == (2, 0.5, (0.25, 0.75))
    assert (
        config.calibration_rollouts,
        config.calibration_rollouts_near_edge,
        config.edge_margin,
        config.solver,
    ) == (4, 8, 0.15, None)
    with pytest.raises(ValidationError, match="band"):
        GateConfig(band=(0.8, 0.2))
    with pytest.raises(ValidationError, match="near_edge"):
        GateConfig(calibration_rollouts=8, calibration_rollouts_near_edge=4)
    with pytest.raises(ValueError, match="unknown stage"):
        config.with_skip("calibration")
    assert config.with_skip("dedup", "calibrate").skip == ["calibrate", "dedup"]
    monkeypatch.setenv("AUTOENVSCALING_GATE_REPEAT", "5")
    assert GateConfig().repeat == 5


def test_context_schema_describes_every_field_for_studio():
    schema = GateConfig.model_json_schema()
    missing = [k for k, v in schema["properties"].items() if not v.get("description")]
    assert not missing


def test_proposer_rewards_follow_the_rejecting_stage():
    every = [passed(s) for s in STAGES]
    assert make_verdict("t", every).proposer_reward == 1.0
    calib = [*every[:7], StageResult(stage="calibrate", passed=False, reason="too easy")]
    verdict = make_verdict("t", calib)
    assert (verdict.stage, verdict.proposer_reward, verdict.admitted) == ("calibrate", -0.25, False)
    lint = [StageResult(stage="lint", passed=False, reason="bad toml")]
    assert make_verdict("t", lint).proposer_reward == -1.0
    infra = [passed("lint"), StageResult.infrastructure("build", "podman missing")]
    verdict = make_verdict("t", infra)
    assert verdict.proposer_reward is None and verdict.infrastructure_error
    assert "not the task's fault" in verdict.reason and "podman missing" in verdict.reason
    # A run that stopped without a failure admits nothing.
    assert not make_verdict("t", every[:3]).admitted


async def test_run_stage_skips_on_request_and_turns_crashes_into_infrastructure(tmp_path):
    config = GateConfig(skip=["build"], heldout_dirs=[GATE_TASKS / "_heldout"])
    skipped = await run_stage("build", FIXTURES / "good_task", config)
    assert skipped.passed and skipped.skipped
    crashed = await run_stage("decontam", tmp_path / "no-such-task", config)
    assert crashed.infrastructure_error and not crashed.passed
    assert "TaskFormatError" in crashed.reason


async def test_decontam_and_dedup_run_only_against_what_is_configured(tmp_path):
    good = FIXTURES / "good_task"
    result = await run_stage("decontam", good, GateConfig())
    assert result.skipped and "not configured" in result.reason  # never "passed"
    result = await run_stage("dedup", good, GateConfig())
    assert result.skipped and "no task pool" in result.reason
    # A task already in the pool is not its own duplicate.
    pool = tmp_path / "pool"
    shutil.copytree(good, pool / "good_task")
    result = await run_stage("dedup", pool / "good_task", GateConfig(pool_dir=pool))
    assert result.passed and not result.skipped and "pool holds no other task" in result.reason
    # ...but a copy of it from outside the pool is.
    result = await run_stage("dedup", good, GateConfig(pool_dir=pool, dedup_threshold=0.9))
    assert not result.passed and result.details["closest"]["similarity"] == 1.0


def test_near_edge_uses_the_margin_around_both_edges():
    config = GateConfig()
    assert near_edge(0.25, config) and near_edge(0.1, config) and near_edge(0.9, config)
    assert not near_edge(0.5, config) and not near_edge(0.0, config) and not near_edge(1.0, config)


def test_shared_inputs_are_not_hidden_files(tmp_path):
    task = tmp_path / "task"
    (task / "environment").mkdir(parents=True)
    (task / "tests").mkdir()
    (task / "solution").mkdir()
    generator = "import random\nrandom.seed(7)\nprint(random.random())\n"
    (task / "environment" / "gen.py").write_text(generator)
    (task / "tests" / "gen.py").write_text(generator)  # regenerates inputs: not an answer
    (task / "tests" / "test_outputs.py").write_text("assert open('/app/out').read() == 'x'\n")
    (task / "solution" / "solve.sh").write_text("#!/bin/bash\necho x > /app/out\n")
    (task / "tests" / "tiny").write_text("1\n")  # below min_bytes: matches by chance
    assert sorted(hidden_files(task, 16).values()) == ["solution/solve.sh", "tests/test_outputs.py"]


def test_inputs_named_by_the_instruction_are_not_leaks():
    instruction = "Restore /etc/app.conf from the backups in /var/backups/app. Work in /app."
    assert named_in_instruction("/var/backups/app/app.conf.1", instruction, "/app")
    assert named_in_instruction("/app/data/input.csv", "Read data/input.csv.", "/app")
    assert not named_in_instruction("/usr/share/misc/.cache", instruction, "/app")
    # Naming the workdir (or a top-level folder) does not bless everything under it.
    assert not named_in_instruction("/app/.hidden/answer.txt", instruction, "/app")
    # A hidden copy named like the output it equals is a leak, whatever the instruction says.
    instruction = "Write the report to /app/report.json."
    assert named_in_instruction("/srv/report.json", instruction, "/app", "/app/other.json")
    assert not named_in_instruction("/srv/report.json", instruction, "/app", "/app/report.json")


def test_tamper_targets_are_image_programs_the_tests_run():
    assert executed_image_files(GATE_TASKS / "verifier_runs_image_file") == ["/opt/grader/grade.sh"]
    assert executed_image_files(FIXTURES / "good_task") == []  # data files only


def test_scheduled_attempts_are_numbered_across_processes(tmp_path):
    counter = tmp_path / "counter"
    assert [next_attempt(counter) for _ in range(3)] == [0, 1, 2]
