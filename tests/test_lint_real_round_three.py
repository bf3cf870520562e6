"""Lint's last false rejections on the public TB2-format corpus (issue 41, round three).

Each test is our own task in the shape of a real one lint rejected falsely (built on the
tb21_schema fixture), shows it accepted, and shows the rule still fires where it has a job.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autoenvscaling.tools.gate.lint import LintReport, lint_task

from .conftest import FIXTURES

REAL = FIXTURES / "real_tasks" / "tb21_schema"


def _task(tmp_path: Path) -> Path:
    dest = tmp_path / "task"
    shutil.copytree(REAL, dest)
    return dest


def _lint(task: Path) -> LintReport:
    return lint_task(task, backend="podman")


def _unnamed(task: Path) -> list[str]:
    return [f.message for f in _lint(task).errors if f.rule == "output-not-in-instruction"]


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


# --------------------------------------------------------------------------- output-not-in-instruction


def test_an_f_string_path_is_a_template_not_its_prefix(tmp_path: Path):
    # metaflow-style: the tests read /app/data/region_{region}.csv for three shipped regions.
    task = _task(tmp_path)
    data = task / "environment" / "data"
    data.mkdir()
    for region in ("north", "south"):
        (data / f"region_{region}.csv").write_text("quantity,price\n1,2\n")
    _append(
        task / "tests" / "test_outputs.py",
        "def test_regions():\n"
        '    for region in ["north", "south"]:\n'
        '        assert Path(f"/app/data/region_{region}.csv").exists()\n',
    )
    assert _unnamed(task) == []
    # a template nothing fits is still reported, as the template (not "region_")
    _append(
        task / "tests" / "test_outputs.py",
        "def test_summaries():\n"
        '    for region in ["north", "south"]:\n'
        '        assert Path(f"/app/out/summary_{region}.json").exists()\n',
    )
    (message,) = _unnamed(task)
    assert "/app/out/summary_*.json" in message
    # ... until the instruction writes the names out
    _append(task / "instruction.md", "\nWrite one `/app/out/summary_<region>.json` per region.\n")
    assert _unnamed(task) == []


def test_a_folder_the_named_tool_makes_is_not_an_output(tmp_path: Path):
    # npm-style: the instruction says to make `npm install` work; the tests check node_modules.
    task = _task(tmp_path)
    _append(
        task / "tests" / "test_outputs.py",
        'assert Path("/app/node_modules").is_dir()\n'
        'assert Path("/app/node_modules/leftpad").is_dir()\n',
    )
    assert [m for m in _unnamed(task) if "node_modules" in m], "no tool named: still reported"
    _append(task / "instruction.md", "\nMake `npm install` succeed in /app.\n")
    assert _unnamed(task) == []


def test_a_path_an_input_file_holds_is_data_not_an_output(tmp_path: Path):
    # zookeeper-style: node paths the tests expect come from the event log the task ships.
    task = _task(tmp_path)
    _append(
        task / "tests" / "test_outputs.py",
        "state = {}\nassert state['/config/database/username'] == 'admin'\n",
    )
    assert any("/config/database/username" in m for m in _unnamed(task))
    (task / "environment" / "events.log").write_text("SET|/config/database/username|admin\n")
    assert _unnamed(task) == []


def test_an_output_flag_followed_by_a_bound_name_is_the_tests_own_file(tmp_path: Path):
    # mpi-style: the tests compile the agent's source into a binary named by a variable.
    task = _task(tmp_path)
    _append(
        task / "tests" / "test_outputs.py",
        "import subprocess\n"
        "def test_compiles():\n"
        '    binary = Path("/app/heat_test")\n'
        '    subprocess.run(["mpicc", "-o", str(binary), "/app/heat.c"], check=True)\n'
        "    assert binary.exists()\n",
    )
    (task / "environment" / "heat.c").write_text("int main(void) { return 0; }\n")
    assert _unnamed(task) == []


# --------------------------------------------------------------------------- image-test-leak


def test_a_test_harness_the_agent_is_given_is_a_warning_not_a_leak(tmp_path: Path):
    # bulkhead-style: `COPY test_isolation.py /app/` beside the program, named by the
    # instruction as the agent's own check; it holds nothing of tests/.
    task = _task(tmp_path)
    (task / "environment" / "test_isolation.py").write_text(
        "import subprocess\n\nresult = subprocess.run(['python3', '/app/main.py'], check=False)\n"
        "print('isolation ok' if result.returncode == 0 else 'isolation broken')\n"
    )
    _append(task / "environment" / "Dockerfile", "COPY test_isolation.py /app/test_isolation.py\n")
    report = _lint(task)
    assert report.ok, report.summary()
    (hit,) = [f for f in report.warnings if f.rule == "image-visible-test"]
    assert "environment/test_isolation.py" in hit.message and hit.line == 4


def test_an_edited_copy_of_the_grader_still_leaks(tmp_path: Path):
    # the same COPY, but the file is the task's grader with a line changed: not a byte copy
    task = _task(tmp_path)
    grader = (task / "tests" / "test_outputs.py").read_text()
    (task / "environment" / "test_mine.py").write_text(grader.replace("raise", "raise  ") + "\n")
    _append(task / "environment" / "Dockerfile", "COPY test_mine.py /app/\n")
    (hit,) = [f for f in _lint(task).errors if f.rule == "image-test-leak"]
    assert "a copy of tests/test_outputs.py (most of its lines)" in hit.message
