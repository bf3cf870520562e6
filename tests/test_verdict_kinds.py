"""Three kinds of "no" (issue 41, item 2): the task is wrong (-1 for a proposer), this machine
cannot run it (what is missing, how to provide it), the infrastructure failed.

Shapes from the public Terminal-Bench 2 set: a base image no registry here serves
(`python:3.13-slim-bookworm`), a verifier that downloads its runner, a compose environment.
Fast tests build the verdict from stage results and ask the real engine what it holds; the slow
one runs the gate's build on a missing base.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.mcp_servers.gate import report_of
from autoenvscaling.tools.gate import GateConfig
from autoenvscaling.tools.gate.config import STAGES
from autoenvscaling.tools.gate.gpu import scored_for_proposer
from autoenvscaling.tools.gate.kinds import missing_base_images, missing_for
from autoenvscaling.tools.gate.pipeline import run_stage, validate_task
from autoenvscaling.tools.gate.results import StageResult, make_verdict

from .conftest import FIXTURES

REAL = FIXTURES / "real_tasks"
ABSENT_BASE = "python:3.13-slim-bookworm"  # used by real TB2 tasks; not in the offline engine


def _passed(*stages: str) -> list[StageResult]:
    return [StageResult(stage=s, passed=True, reason="ok") for s in stages]  # type: ignore[arg-type]


def _with_base(tmp_path: Path, image: str) -> Path:
    task = tmp_path / "task"
    shutil.copytree(REAL / "tb21_schema", task)
    dockerfile = task / "environment" / "Dockerfile"
    lines = dockerfile.read_text().splitlines()
    dockerfile.write_text("\n".join([f"FROM {image}", *lines[1:]]) + "\n")
    return task


def test_a_missing_base_image_cannot_run_here_and_says_how_to_provide_it(tmp_path: Path):
    missing = missing_base_images(
        [ABSENT_BASE, "debian:bookworm-slim"], {"debian:bookworm-slim"}, "podman"
    )
    assert [m.need for m in missing] == ["base_image"]
    build = StageResult(
        stage="build", passed=False, reason="the environment does not build", missing=missing
    )
    verdict = make_verdict(tmp_path, [*_passed("lint"), build], backend="podman")
    assert verdict.kind == "cannot_run_here" and verdict.proposer_reward is None
    assert not verdict.infrastructure_error
    assert ABSENT_BASE in verdict.reason and "podman pull" in verdict.reason
    assert "tools.sandbox.bases --engine podman python:3.13" in verdict.reason
    assert "timeout" not in verdict.reason and "not judged" in verdict.summary()
    # a proposer was told which bases exist: for it, the task is wrong
    scored = scored_for_proposer(verdict)
    assert scored.kind == "task_wrong" and scored.proposer_reward == -1.0
    assert "Your brief lists the base images" in scored.reason
    # the proposer's check tool shows the kind it will be scored by, with what is missing
    report = report_of(verdict)
    assert report.kind == "cannot_run_here" and ABSENT_BASE in report.missing[0]


async def test_the_engine_is_asked_which_bases_it_holds(engine_ready, tmp_path: Path):
    task = _with_base(tmp_path, ABSENT_BASE)
    found = await missing_for("build", task, {}, backend="podman", allow_internet=False)
    assert [m.what.split(" (")[0] for m in found] == [f"base image {ABSENT_BASE}"]
    held = _with_base(tmp_path / "held", "debian:bookworm-slim")  # `make bases` tags it
    assert await missing_for("build", held, {}, backend="podman", allow_internet=False) == []


async def test_a_verifier_that_fetches_cannot_run_offline():
    oracle = StageResult(
        stage="oracle", passed=False, reason="no reward", details={"network_need": True}
    )
    task = REAL / "downloads_runner"
    missing = await missing_for(
        "oracle", task, oracle.details, backend="podman", allow_internet=False
    )
    assert [m.need for m in missing] == ["internet"]
    assert "downloads uv" in missing[0].what and "--allow-internet" in missing[0].provide
    verdict = make_verdict(
        task, [*_passed("lint", "build"), oracle.model_copy(update={"missing": missing})]
    )
    assert verdict.kind == "cannot_run_here" and verdict.proposer_reward is None
    # granted, the same failure is the task's (the fetch itself failed)
    assert not await missing_for(
        "oracle", task, oracle.details, backend="podman", allow_internet=True
    )


async def test_compose_on_podman_is_cannot_run_here_and_a_lint_error_is_the_task(tmp_path: Path):
    task = tmp_path / "task"
    shutil.copytree(REAL / "tb21_schema", task)
    (task / "environment" / "docker-compose.yaml").write_text("services:\n  main:\n    build: .\n")
    lint = await run_stage("lint", task, GateConfig())
    assert [m.need for m in lint.missing] == ["compose"], lint.reason
    assert "--backend harbor-docker" in lint.missing[0].provide
    assert make_verdict(task, [lint]).kind == "cannot_run_here"
    # with an error of its own besides, the task is wrong
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho no reward\n")
    lint = await run_stage("lint", task, GateConfig())
    verdict = make_verdict(task, [lint])
    assert lint.missing == [] and verdict.kind == "task_wrong" and verdict.proposer_reward == -1.0


def test_infrastructure_is_its_own_kind(tmp_path: Path):
    crashed = StageResult.infrastructure("build", "the engine did not answer")
    verdict = make_verdict(tmp_path, [*_passed("lint"), crashed])
    assert verdict.kind == "infrastructure" and verdict.proposer_reward is None
    assert scored_for_proposer(verdict).proposer_reward is None
    admitted = make_verdict(tmp_path, _passed(*STAGES))
    assert admitted.admitted and admitted.kind is None


@pytest.mark.slow
async def test_the_build_of_a_missing_base_is_not_blamed_on_the_task(engine_ready, tmp_path: Path):
    task = _with_base(tmp_path, ABSENT_BASE)
    verdict = await validate_task(task, GateConfig(), skip=STAGES[STAGES.index("build") + 1 :])
    assert verdict.stage == "build" and verdict.kind == "cannot_run_here", verdict.summary()
    assert verdict.proposer_reward is None and ABSENT_BASE in verdict.reason
    assert "build timeout" not in verdict.reason
