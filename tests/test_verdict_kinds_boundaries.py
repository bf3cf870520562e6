"""The kind of "no" where each verdict leaves the code (issue 41, item 2): `validate`'s exit
status, table and `--json`, the proposer's `check` tool over a real MCP session, and the viewer's
pages over its HTTP app. The shapes are real TB2 ones: a compose environment on podman (cannot run
here, judged by lint alone), a base image no registry here serves, a test.sh that writes no
reward (task wrong), an engine that did not answer (infrastructure).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from autoenvscaling.cli.exit_codes import ExitCode, exit_code_for_kinds
from autoenvscaling.cli.main import app
from autoenvscaling.graphs.agent.mcp_tools import open_mcp_tools
from autoenvscaling.mcp_servers.gate import build_gate_server
from autoenvscaling.tools.gate.kinds import missing_base_images
from autoenvscaling.tools.gate.results import StageResult, make_verdict
from autoenvscaling.viewer.app import create_app

from .conftest import FIXTURES

pytestmark = pytest.mark.timeout(120)
REAL = FIXTURES / "real_tasks"
ABSENT_BASE = "python:3.13-slim-bookworm"


def _compose_task(root: Path) -> Path:
    task = root / "compose-task"
    shutil.copytree(REAL / "tb21_schema", task)
    (task / "environment" / "docker-compose.yaml").write_text("services:\n  main:\n    build: .\n")
    return task


def _no_reward(task: Path) -> Path:
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho checked\n")
    return task


def test_the_exit_status_of_several_kinds():
    assert exit_code_for_kinds([None, None]) == ExitCode.OK
    assert exit_code_for_kinds([None, "task_wrong"]) == ExitCode.FAILED
    assert exit_code_for_kinds(["task_wrong", "cannot_run_here"]) == ExitCode.CANNOT_RUN_HERE
    assert exit_code_for_kinds(["cannot_run_here", "infrastructure"]) == ExitCode.INFRASTRUCTURE
    assert ExitCode.CANNOT_RUN_HERE == 4  # documented in README's exit-status table


def test_validate_exits_4_and_says_what_is_missing(tmp_path: Path):
    task = _compose_task(tmp_path)
    runner = CliRunner()
    result = runner.invoke(app, ["validate", str(task), "--json"])
    assert result.exit_code == ExitCode.CANNOT_RUN_HERE, result.output
    (row,) = json.loads(result.stdout)
    assert (row["kind"], row["stage"], row["proposer_reward"]) == ("cannot_run_here", "lint", None)
    (missing,) = row["missing"]
    assert missing["need"] == "compose" and "--backend harbor-docker" in missing["provide"]
    table = runner.invoke(app, ["validate", str(task)], env={"COLUMNS": "300"})
    assert table.exit_code == ExitCode.CANNOT_RUN_HERE and "cannot run here" in table.stdout
    # the same task with an error of its own is wrong: exit 1, kind task_wrong
    wrong = runner.invoke(app, ["validate", str(_no_reward(task)), "--json"])
    assert wrong.exit_code == ExitCode.FAILED, wrong.output
    assert json.loads(wrong.stdout)[0]["kind"] == "task_wrong"


async def test_the_proposers_check_names_the_kind_it_is_scored_by(tmp_path: Path):
    """A proposer was briefed (one Dockerfile, no compose): its compose task is task_wrong at -1,
    and the check result still names what the machine lacks."""
    task = _compose_task(tmp_path)
    async with open_mcp_tools({"gate": build_gate_server(task)}) as tools:
        check = next(t for t in tools if t.name == "check")
        reply = await check.ainvoke(
            {"type": "tool_call", "name": "check", "args": {"until": "lint"}, "id": "1"}
        )
    report = json.loads(reply.text)
    assert (report["passed"], report["stage"], report["kind"]) == (False, "lint", "task_wrong")
    assert report["missing"] and "compose" in report["missing"][0]
    assert "Your brief lists the base images" in report["reason"]


def _run_folder(root: Path) -> Path:
    """A run folder holding three judged candidates of round 1, one per kind of "no"."""
    round_1 = root / "candidates" / "r01"
    lint = StageResult(stage="lint", passed=True, reason="ok")
    build_missing = StageResult(
        stage="build",
        passed=False,
        reason="the environment does not build",
        missing=missing_base_images([ABSENT_BASE], set(), "podman"),
    )
    no_reward = StageResult(stage="oracle", passed=False, reason="no reward written")
    crashed = StageResult.infrastructure("build", "the engine did not answer")
    for name, stages in {
        "cand-base": [lint, build_missing],
        "cand-wrong": [lint, StageResult(stage="build", passed=True, reason="ok"), no_reward],
        "cand-infra": [lint, crashed],
    }.items():
        folder = round_1 / name
        folder.mkdir(parents=True)
        (folder / "instruction.md").write_text(f"# {name}\n")
        verdict = make_verdict(folder, stages, backend="podman")
        folder.with_name(f"{name}.verdict.json").write_text(verdict.model_dump_json())
    return root


def test_the_viewer_shows_the_kind_and_what_is_missing(tmp_path: Path):
    root = _run_folder(tmp_path / "run")
    with TestClient(create_app(root), base_url="http://127.0.0.1") as client:
        listing = client.get("/candidates")
        assert listing.status_code == 200
        rows = {
            name: line
            for line in listing.text.split("<tr")
            for name in ("cand-base", "cand-wrong", "cand-infra")
            if f">{name}<" in line
        }
        assert 'class="cannot-run"' in rows["cand-base"]
        assert "cannot run here (1 missing)" in rows["cand-base"]
        assert '<td class="verdict" title="task_wrong">rejected</td>' in rows["cand-wrong"]
        assert "not judged (infrastructure)" in rows["cand-infra"]
        page = client.get("/candidates/1/cand-base")
        assert page.status_code == 200
        assert '<span id="verdict-kind">cannot_run_here</span>' in page.text
        missing = page.text.split('<ul id="missing">')[1].split("</ul>")[0]
        assert f"base image {ABSENT_BASE}" in missing and "podman pull" in missing
        wrong = client.get("/candidates/1/cand-wrong")
        assert "the task is wrong" in wrong.text and 'id="missing"' not in wrong.text
