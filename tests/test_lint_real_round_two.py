"""Lint accepts what real Terminal-Bench 2 authors write (issue 41, item 1).

Each test takes the shape of a pattern met in the public TB2 set (our own files, built on the
tb21_schema fixture) that lint used to reject falsely, and shows it accepted; where the rule still
has a job, a second case shows it still fires.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.tasks.limits import TaskLimits

from .conftest import FIXTURES

REAL = FIXTURES / "real_tasks" / "tb21_schema"


def _task(tmp_path: Path) -> Path:
    dest = tmp_path / "task"
    shutil.copytree(REAL, dest)
    return dest


def _errors(task: Path) -> set[str]:
    return {f.rule for f in lint_task(task, backend="podman").errors}


def _append(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


# --------------------------------------------------------------------------- output-not-in-instruction


def test_files_the_tests_build_or_fetch_themselves_are_not_outputs(tmp_path: Path):
    # A verifier compiles a probe against the agent's library, fetches a page from the agent's
    # server, tees a log and types keystrokes into the agent's shell: all in Python strings.
    task = _task(tmp_path)
    _append(
        task / "tests" / "test_outputs.py",
        "import subprocess\n"
        "def test_links():\n"
        "    subprocess.run(\n"
        '        ["gcc", "/tests/probe.c", "-o",\n'
        '         "/app/probe.o"], check=True)\n'
        '    subprocess.run("curl -s -o /app/index.html http://localhost:8080/", shell=True)\n'
        '    subprocess.run("make 2>&1 | tee /app/build.log", shell=True)\n'
        '    session.send_keys("tac /app/lines.txt > /app/session.out", "Enter")\n'
        '    assert open("/app/probe.o", "rb") and open("/app/index.html") and open("/app/build.log")\n'
        '    assert open("/app/session.out").read()\n',
    )
    assert "output-not-in-instruction" not in _errors(task)


def test_a_path_named_to_be_absent_is_an_error_probe_not_an_output(tmp_path: Path):
    task = _task(tmp_path)
    _append(
        task / "tests" / "test_outputs.py",
        "import subprocess\n"
        "def test_missing_input():\n"
        '    r = subprocess.run(["python3", "/app/reverse.py", "/app/does-not-exist.txt"])\n'
        "    assert r.returncode != 0\n",
    )
    (task / "instruction.md").write_text(
        (task / "instruction.md").read_text() + "Write it as `/app/reverse.py`.\n"
    )
    assert "output-not-in-instruction" not in _errors(task)


def test_an_output_the_tests_only_read_is_still_reported(tmp_path: Path):
    # The literal reading must not hide a real unnamed output.
    task = _task(tmp_path)
    _append(
        task / "tests" / "test_outputs.py",
        'import subprocess\nsubprocess.run(["cat", "/app/summary.json"])\n'
        'assert open("/app/summary.json").read()\n',
    )
    report = lint_task(task, backend="podman")
    hits = [f for f in report.errors if f.rule == "output-not-in-instruction"]
    assert hits and "/app/summary.json" in hits[0].message


# --------------------------------------------------------------------------- task-limits


def test_real_timeouts_pass_and_a_cap_names_its_setting(tmp_path: Path):
    task = _task(tmp_path)
    toml = task / "task.toml"
    text = toml.read_text()
    # the longest agent and verifier timeouts of the public TB2 set
    toml.write_text(
        text.replace(
            "[verifier]\ntimeout_sec = 120.0", "[verifier]\ntimeout_sec = 12000.0"
        ).replace("[agent]\ntimeout_sec = 300.0", "[agent]\ntimeout_sec = 12000.0")
    )
    assert "task-limits" not in _errors(task)
    tight = lint_task(task, TaskLimits(max_verifier_timeout_sec=1800.0))
    (hit,) = [f for f in tight.errors if f.rule == "task-limits"]
    assert "verifier.timeout_sec" in hit.message and "<= 1800" in hit.message
    assert "AUTOENVSCALING_TASK_MAX_VERIFIER_TIMEOUT_SEC=12000" in hit.message


# --------------------------------------------------------------------------- image-test-leak


def test_build_inputs_under_environment_tests_are_not_a_leak(tmp_path: Path):
    # A simulator's sources kept in environment/tests/ and copied to /app, as the instruction says.
    task = _task(tmp_path)
    sim = task / "environment" / "tests"
    sim.mkdir()
    (sim / "sim.c").write_text("int main(void) { return 0; }\n")
    (sim / "Makefile").write_text("sim: sim.c\n\tcc -o sim sim.c\n")
    _append(task / "environment" / "Dockerfile", "COPY tests/ /app/\n")
    assert "image-test-leak" not in _errors(task)
    # a test script among them, or a copy of the task's own tests, still leaks
    (sim / "test_sim.py").write_text("assert True\n")
    assert "image-test-leak" in _errors(task)
    (sim / "test_sim.py").unlink()
    shutil.copy(task / "tests" / "test_outputs.py", sim / "check.py")
    assert "image-test-leak" in _errors(task)


# --------------------------------------------------------------------------- style rules


def test_an_unpinned_pip_install_is_a_warning(tmp_path: Path):
    task = _task(tmp_path)
    _append(task / "environment" / "Dockerfile", "RUN pip install numpy\n")
    report = lint_task(task, backend="podman")
    assert report.ok, report.summary()
    (hit,) = [f for f in report.warnings if f.rule == "unpinned-python-dependency"]
    assert "`numpy`" in hit.message


def test_cmd_is_ignored_as_harbor_ignores_it(tmp_path: Path):
    task = _task(tmp_path)
    _append(task / "environment" / "Dockerfile", 'CMD ["/bin/bash"]\n')
    report = lint_task(task, backend="podman")
    assert report.ok, report.summary()
    assert "dockerfile-cmd-ignored" in {f.rule for f in report.warnings}
    _append(task / "environment" / "Dockerfile", 'ENTRYPOINT ["/bin/sh"]\n')
    assert "dockerfile-unsupported-instruction" in _errors(task)


# --------------------------------------------------------------------------- base images


def test_a_base_the_offline_engine_lacks_is_warned_with_how_to_provide_it(tmp_path: Path):
    # ubuntu:24.04 and python:3.13-slim-bookworm, the commonest TB2 bases, are not in the engine
    task = _task(tmp_path)
    dockerfile = task / "environment" / "Dockerfile"
    body = dockerfile.read_text().splitlines()[1:]
    for image in ("ubuntu:24.04", "python:3.13-slim-bookworm"):
        dockerfile.write_text("\n".join([f"FROM {image}", *body]) + "\n")
        report = lint_task(task, backend="podman")
        assert report.ok, report.summary()
        (hit,) = [f for f in report.warnings if f.rule == "dockerfile-base-image"]
        assert image in hit.message and "debian:bookworm-slim" in hit.message
        assert f"tools.sandbox.bases {image}" in hit.message and "cannot run here" in hit.message
    dockerfile.write_text("\n".join(["FROM docker.io/library/debian:bookworm-slim", *body]) + "\n")
    assert "dockerfile-base-image" not in {f.rule for f in lint_task(task).warnings}
