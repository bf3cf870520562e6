"""`autoenvscaling import DIR` (issue 41, item 4): a TB2-format dataset in, a report out.

The dataset is our own, one task per shape met in public TB2-format tasks: a task ready for the
gate, one whose tests write no reward (task wrong), a base image the engine does not hold and a
verifier that downloads its runner (cannot run here), a compose environment, a verifier that
runs the agent's program (forgeable), and one with what --rewrite changes mechanically (CMD, a
CRLF script, pytest started in the agent's folder). Run through the real CLI (typer's CliRunner)
without building anything; base images judged by the offline bases (--no-engine) except in the
test that asks the real engine.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoenvscaling.cli.exit_codes import ExitCode
from autoenvscaling.cli.main import app
from autoenvscaling.tools.gate.importer import BaseImages, import_dataset

from .conftest import FIXTURES

REAL = FIXTURES / "real_tasks"
ABSENT_BASE = "python:3.13-slim-bookworm"  # real TB2 tasks use it; not an offline base


def _task(dataset: Path, name: str, source: str = "tb21_schema") -> Path:
    dest = dataset / name
    shutil.copytree(REAL / source, dest)
    return dest


def _from(task: Path, image: str) -> None:
    dockerfile = task / "environment" / "Dockerfile"
    lines = dockerfile.read_text().splitlines()
    dockerfile.write_text("\n".join([f"FROM {image}", *lines[1:]]) + "\n")


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    root = tmp_path / "tb2"
    _task(root, "ready")
    wrong = _task(root, "no-reward")
    (wrong / "tests" / "test.sh").write_text("#!/bin/bash\npython3 /tests/test_outputs.py\n")
    _from(_task(root, "new-python"), ABSENT_BASE)
    _task(root, "fetches-uv", "downloads_runner")
    compose = _task(root, "compose")
    (compose / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build: .\n"
    )
    forged = _task(root, "runs-agent-program")
    (forged / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if /app/run.sh; then echo 1 > /logs/verifier/reward.txt; "
        "else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (forged / "instruction.md").write_text("Write /app/run.sh, which exits 0.\n")
    fixable = _task(root, "fixable")
    (fixable / "environment" / "Dockerfile").write_text(
        "FROM python:3.12-slim-bookworm\nWORKDIR /app\nCOPY lines.txt /app/lines.txt\n"
        'CMD ["sleep", \\\n  "infinity"]\n'
    )
    (fixable / "tests" / "test.sh").write_bytes(
        b"#!/bin/bash\r\nmkdir -p /logs/verifier\r\n"
        b"if python3 -m pytest /tests/test_outputs.py; then echo 1 > /logs/verifier/reward.txt;"
        b" else echo 0 > /logs/verifier/reward.txt; fi\r\n"
    )
    return root


def _invoke(*args: str):
    # wide enough that rich's error box does not break the message across lines
    return CliRunner().invoke(app, ["import", *args], env={"COLUMNS": "400"})


def test_each_task_gets_its_kind_of_no_and_what_is_missing(dataset: Path):
    result = _invoke(str(dataset), "--json", "--no-engine")
    assert result.exit_code == ExitCode.CANNOT_RUN_HERE, result.output  # 4 wins over 1
    report = json.loads(result.stdout)
    rows = {row["task"]: row for row in report["tasks"]}
    assert rows["ready"]["kind"] is None and rows["ready"]["lint_ok"]
    assert rows["no-reward"]["kind"] == "task_wrong"
    assert "no-reward-file" in rows["no-reward"]["errors"][0]
    (base,) = rows["new-python"]["missing"]
    assert base["need"] == "base_image" and ABSENT_BASE in base["what"]
    assert "not one of the offline bases" in base["what"] and "podman pull" in base["provide"]
    (net,) = rows["fetches-uv"]["missing"]
    assert net["need"] == "internet" and "uv" in net["what"]
    assert [m["need"] for m in rows["compose"]["missing"]] == ["compose"]
    assert rows["compose"]["kind"] == "cannot_run_here"
    forged = rows["runs-agent-program"]
    assert forged["forgeable_if_separate"]
    assert {r["route"] for r in forged["forge_routes"]} >= {"agent_program"}
    assert not rows["ready"]["forgeable_if_separate"]
    counts = report["counts"]
    assert (counts["tasks"], counts["task_wrong"], counts["cannot_run_here"]) == (7, 2, 3)
    assert counts["ready"] == 2 and counts["missing_base_image"] == 1


def test_the_exit_status_follows_the_worst_kind(dataset: Path):
    for name in ("new-python", "fetches-uv", "compose"):
        shutil.rmtree(dataset / name)
    assert _invoke(str(dataset), "--no-engine").exit_code == ExitCode.FAILED
    for name in ("no-reward", "fixable"):
        shutil.rmtree(dataset / name)
    result = _invoke(str(dataset), "--no-engine")
    assert result.exit_code == ExitCode.OK, result.output
    assert "2 tasks: 2 pass lint; 2 ready for the gate" in " ".join(result.stdout.split())


def test_rewrite_changes_a_copy_says_what_and_lints_it_again(dataset: Path, tmp_path: Path):
    before = {p: p.read_bytes() for p in dataset.rglob("*") if p.is_file()}
    out = tmp_path / "rewritten"
    result = _invoke(str(dataset), "--json", "--no-engine", "--rewrite", str(out))
    rows = {row["task"]: row for row in json.loads(result.stdout)["tasks"]}
    fixable = rows["fixable"]
    assert fixable["kind"] == "task_wrong"  # the CRLF test.sh is a format error
    assert [c["rule"] for c in fixable["rewritten"]] == [
        "dockerfile-cmd-ignored",
        "task-format",
        "hack-runner-in-writable-cwd",
    ]
    assert fixable["after_rewrite"] is None  # the copy is ready for the gate
    assert "CMD" not in (out / "fixable" / "environment" / "Dockerfile").read_text()
    script = (out / "fixable" / "tests" / "test.sh").read_bytes()
    assert b"\r" not in script and script.index(b"cd /tests") < script.index(b"pytest")
    # a task that needs none is copied unchanged; the dataset itself is untouched
    assert rows["ready"]["rewritten"] == []
    assert before == {p: p.read_bytes() for p in dataset.rglob("*") if p.is_file()}


def test_a_runner_line_followed_by_a_relative_path_is_left_alone(dataset: Path, tmp_path: Path):
    script = dataset / "fixable" / "tests" / "test.sh"
    script.write_text(
        "#!/bin/bash\npython3 -m pytest /tests/test_outputs.py\n"
        "python3 check_output.py > /logs/verifier/reward.txt\n"
    )
    result = _invoke(str(dataset), "--json", "--no-engine", "--rewrite", str(tmp_path / "out"))
    rows = {row["task"]: row for row in json.loads(result.stdout)["tasks"]}
    assert "hack-runner-in-writable-cwd" not in {c["rule"] for c in rows["fixable"]["rewritten"]}


def test_bad_input_is_a_usage_error(tmp_path: Path, dataset: Path):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _invoke(str(empty))
    assert result.exit_code == ExitCode.USAGE and "holds no task" in result.output
    inside = _invoke(str(dataset), "--rewrite", str(dataset / "copies"))
    assert inside.exit_code == ExitCode.USAGE and "outside the dataset" in inside.output


def test_the_engine_is_asked_which_bases_it_holds(engine_ready, dataset: Path):
    report = import_dataset(dataset, backend="podman")
    assert report.engine_asked
    rows = {row.task: row for row in report.tasks}
    (base,) = rows["new-python"].missing
    assert "not in the podman engine" in base.what
    assert rows["ready"].kind is None  # python:3.12-slim-bookworm: `make bases` made it
    assert BaseImages("podman").held("python:3.12-slim-bookworm")


def test_gate_adds_the_real_gates_verdict(tmp_path: Path):
    """--gate runs the admission gate itself; both tasks stop at lint, so nothing builds."""
    root = tmp_path / "tb2"
    compose = _task(root, "compose")
    (compose / "environment" / "docker-compose.yaml").write_text(
        "services:\n  main:\n    build: .\n"
    )
    wrong = _task(root, "no-reward")
    (wrong / "tests" / "test.sh").write_text("#!/bin/bash\npython3 /tests/test_outputs.py\n")
    result = _invoke(str(root), "--json", "--no-engine", "--gate")
    assert result.exit_code == ExitCode.CANNOT_RUN_HERE, result.output
    rows = {row["task"]: row for row in json.loads(result.stdout)["tasks"]}
    gate = rows["compose"]["gate"]
    assert (gate["kind"], gate["stage"], gate["missing"][0]["need"]) == (
        "cannot_run_here",
        "lint",
        "compose",
    )
    assert rows["no-reward"]["gate"]["kind"] == "task_wrong"
