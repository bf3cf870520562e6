"""The static forgeability report (issue 41, item 3), on verifier shapes from the public
Terminal-Bench 2 set: the tests run the agent's program, git in its repository, Python with its
folder on the path, all as root; and the same lines run as an unprivileged user."""

from __future__ import annotations

import shutil
from pathlib import Path

from autoenvscaling.tools.gate.forgeability import forgeability

from .conftest import FIXTURES

REAL = FIXTURES / "real_tasks" / "tb21_schema"


def _task(tmp_path: Path, tests_py: str = "", test_sh: str = "", separate: bool = True) -> Path:
    task = tmp_path / "task"
    shutil.copytree(REAL, task)
    if tests_py:
        (task / "tests" / "test_outputs.py").write_text(tests_py)
    if test_sh:
        (task / "tests" / "test.sh").write_text(test_sh)
    if separate:
        toml = task / "task.toml"
        toml.write_text(
            toml.read_text().replace("[verifier]\n", '[verifier]\nenvironment_mode = "separate"\n')
        )
    return task


def _routes(task: Path) -> set[tuple[str, str]]:
    return {(r.route, r.what) for r in forgeability(task).routes}


def test_the_fixture_verifier_runs_only_its_own_copy(tmp_path: Path):
    # tb21_schema copies /tests/compare.sh into /app and runs it: the tests' file, not the agent's
    assert forgeability(_task(tmp_path)).forgeable is False


def test_running_the_agents_program_as_root_is_forgeable(tmp_path: Path):
    task = _task(
        tmp_path,
        tests_py="import subprocess\n\ndef test_runs():\n    r = subprocess.run(\n"
        '        ["python3", "/app/reverse.py", "/app/lines.txt"], capture_output=True\n'
        "    )\n    assert r.returncode == 0\n",
    )
    report = forgeability(task)
    assert report.forgeable and report.forgeable_if_separate
    (route,) = report.routes
    assert (route.route, route.what, route.line) == ("agent_program", "/app/reverse.py", 5)
    assert "setpriv" in route.fix and "forgeable via agent_program" in report.summary()
    # the same call as an unprivileged user cannot write the reward
    dropped = _task(
        tmp_path / "dropped",
        tests_py="import subprocess\n"
        'subprocess.run(["/app/reverse.py"], user="nobody", group="nogroup")\n',
    )
    assert not forgeability(dropped).forgeable


def test_git_in_the_agents_repository_and_its_python_path(tmp_path: Path):
    task = _task(
        tmp_path,
        test_sh="#!/bin/bash\ncd /app\ngit log --oneline > /tmp/log.txt\n"
        "PYTHONPATH=/app python3 /tests/test_outputs.py && echo 1 > /logs/verifier/reward.txt\n",
        tests_py='import subprocess, sys\nsys.path.insert(0, "/app")\n'
        'subprocess.run(["git", "status"], cwd="/app/repo")\n',
    )
    assert _routes(task) >= {
        ("git_in_agent_repo", "git in /app"),
        ("git_in_agent_repo", "git in /app/repo"),
        ("agent_python_path", "Python path /app"),
    }
    # git on a folder of the tests' own is nobody's forgery
    clean = _task(tmp_path / "clean", test_sh="#!/bin/bash\ngit -C /tests/ref log\n")
    assert not forgeability(clean).forgeable


def test_a_shared_verifier_with_a_root_agent_is_forgeable_as_written(tmp_path: Path):
    # TB2 tasks state no verifier mode: Harbor runs the tests in the agent's container
    report = forgeability(_task(tmp_path, separate=False))
    assert report.forgeable and not report.forgeable_if_separate
    assert [r.route for r in report.routes] == ["shared_root"]
    assert "separate" in report.routes[0].fix
