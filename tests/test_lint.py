"""The gate's static lint stage over real task folders: planted defects, the good task, the seed pool."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.tools.gate.lint import LintReport, lint_task

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOOD = FIXTURES / "good_task"
BAD = FIXTURES / "bad_tasks"
SEED = Path(__file__).resolve().parents[1] / "tasks" / "seed"

# folder -> (rule, file, line or None, words the message must contain)
DEFECTS: dict[str, tuple[str, str, int | None, list[str]]] = {
    "invalid_toml": ("task-format", "task.toml", None, ["invalid TOML"]),
    "bad_field_type": ("task-format", "task.toml", None, ["agent.timeout_sec", "valid number"]),
    "unknown_field": ("task-format", "task.toml", None, ["agent.timeout_secs", "unknown field"]),
    "missing_instruction": ("task-format", "instruction.md", None, ["missing"]),
    "empty_instruction": ("task-format", "instruction.md", None, ["is empty"]),
    "non_utf8_instruction": ("task-format", "instruction.md", None, ["UTF-8"]),
    "missing_test_sh": ("task-format", "tests/test.sh", None, ["missing"]),
    "missing_dockerfile": ("task-format", "environment/Dockerfile", None, ["docker_image"]),
    "multi_step": ("task-format", "task.toml", None, ["steps", "multi-step"]),
    "script_crlf": ("task-format", "solution/solve.sh", None, ["CRLF"]),
    "unsupported_dockerfile_instruction": (
        "dockerfile-unsupported-instruction",
        "environment/Dockerfile",
        4,
        ["EXPOSE"],
    ),
    "dockerfile_copies_tests": (
        "image-test-leak",
        "environment/Dockerfile",
        4,
        ["COPY tests/", "Remove this COPY"],
    ),
    "context_leaks_solution": (
        "image-test-leak",
        "environment/Dockerfile",
        3,
        ["make_words.sh", "solution/solve.sh"],
    ),
    "no_reward_written": (
        "no-reward-file",
        "tests/test.sh",
        None,
        ["/logs/verifier/reward.txt", "exit code"],
    ),
    "unnamed_output": (
        "output-not-in-instruction",
        "tests/test_outputs.py",
        23,
        ["/app/summary.txt"],
    ),
    "remote_add": ("dockerfile-remote-add", "environment/Dockerfile", 4, ["https://"]),
}


def _copy(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / src.name
    shutil.copytree(src, dest)
    return dest


def _rules(report: LintReport) -> set[str]:
    return {f.rule for f in report.errors}


def test_good_task_lints_clean():
    report = lint_task(GOOD)
    assert report.ok and report.findings == []
    assert report.summary() == "lint: no findings"


# Style rules: the task passes lint, with a warning (Harbor's own lint warns too).
STYLE: dict[str, tuple[str, str, int | None, list[str]]] = {
    "unpinned_pip": (
        "unpinned-python-dependency",
        "environment/Dockerfile",
        4,
        ["`requests`", "=="],
    ),
    "unpinned_requirements": (
        "unpinned-python-dependency",
        "environment/requirements.txt",
        2,
        ["requests>=2.0"],
    ),
}


def test_every_bad_fixture_has_an_expectation():
    assert sorted(p.name for p in BAD.iterdir()) == sorted({**DEFECTS, **STYLE})


@pytest.mark.parametrize("folder", sorted(STYLE))
def test_each_style_defect_is_a_named_warning(folder: str):
    rule, file, line, words = STYLE[folder]
    report = lint_task(BAD / folder)
    assert report.ok, report.summary()
    hits = [f for f in report.warnings if f.rule == rule and f.file == file]
    assert hits and hits[0].line == line, report.summary()
    for word in words:
        assert word in hits[0].message, (word, hits[0].message)


@pytest.mark.parametrize("folder", sorted(DEFECTS))
def test_each_planted_defect_is_found_and_named(folder: str):
    rule, file, line, words = DEFECTS[folder]
    report = lint_task(BAD / folder)
    assert not report.ok
    hits = [f for f in report.errors if f.rule == rule and f.file == file]
    assert hits, report.summary()
    finding = hits[0]
    assert finding.line == line
    for word in words:
        assert word in finding.message, (word, finding.message)
    # one planted defect -> no unrelated errors
    assert {f.rule for f in report.errors} == {rule}, report.summary()
    assert str(finding).startswith(f"{file}:{line}: [{rule}]" if line else f"{file}: [{rule}]")


def test_lint_never_raises_on_a_missing_folder(tmp_path: Path):
    report = lint_task(tmp_path / "nope")
    assert not report.ok
    assert "does not exist" in report.errors[0].message


def test_seed_pool_has_no_lint_errors():
    seeds = sorted(p for p in SEED.iterdir() if (p / "task.toml").exists()) if SEED.is_dir() else []
    if not seeds:
        pytest.skip("tasks/seed has no tasks yet")
    failing = {p.name: lint_task(p).summary() for p in seeds if not lint_task(p).ok}
    assert failing == {}


def test_shared_generator_is_a_warning_not_an_error(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    generator = "import sys\nopen(sys.argv[1], 'w').write('the fox\\n')\n"
    (task / "environment" / "gen.py").write_text(generator)
    (task / "tests" / "gen.py").write_text(generator)
    with (task / "environment" / "Dockerfile").open("a") as f:
        f.write("COPY gen.py /opt/gen.py\n")
    report = lint_task(task)
    assert report.ok
    assert [f.rule for f in report.warnings] == ["image-shares-test-file"]
    assert "identical to tests/gen.py" in report.warnings[0].message


def test_copy_of_a_grader_into_the_image_is_an_error(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    shutil.copy(task / "tests" / "test_outputs.py", task / "environment" / "check.py")
    with (task / "environment" / "Dockerfile").open("a") as f:
        f.write("COPY *.py /opt/\n")
    report = lint_task(task)
    assert _rules(report) == {"image-test-leak"}
    assert "a copy of tests/test_outputs.py" in report.errors[0].message


def test_copy_from_outside_the_build_context(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    with (task / "environment" / "Dockerfile").open("a") as f:
        f.write("COPY ../solution/solve.sh /opt/solve.sh\n")
    report = lint_task(task)
    assert _rules(report) == {"image-test-leak"}
    assert "outside it" in report.errors[0].message


def test_dockerfile_builder_limits(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    (task / "environment" / "Dockerfile").write_text(
        "RUN echo too early\n"
        "FROM --platform=linux/amd64 debian:bookworm-slim\n"
        "RUN --mount=type=cache,target=/root/.cache echo hi\n"
        "COPY --from=builder /out /app\n"
        "COPY missing.txt /app/\n"
        "RUN <<EOF\n"
        "echo inside a heredoc\n"
        "EOF\n"
        "FROM debian:bookworm\n"
    )
    report = lint_task(task)
    by_line = {(f.line, f.rule) for f in report.errors}
    assert by_line == {
        (1, "dockerfile-no-from"),
        (2, "dockerfile-flags"),
        (3, "dockerfile-flags"),
        (4, "dockerfile-flags"),
        (5, "dockerfile-missing-source"),
        (6, "dockerfile-heredoc"),
        (9, "dockerfile-multi-stage"),
    }, report.summary()


def test_unknown_base_image_is_only_a_warning(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text().replace("python:3.12-slim-bookworm", "alpine:3.20")
    )
    report = lint_task(task)
    assert report.ok
    assert [f.rule for f in report.warnings] == ["dockerfile-base-image"]


def test_unpinned_pip_in_test_sh(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    script = task / "tests" / "test.sh"
    script.write_text(script.read_text().replace("mkdir -p", "pip install pytest\nmkdir -p"))
    report = lint_task(task)
    (hit,) = [f for f in report.warnings if f.rule == "unpinned-python-dependency"]
    assert report.ok and hit.file == "tests/test.sh" and "`pytest`" in hit.message


def test_reward_json_counts_as_a_reward(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    script = task / "tests" / "test.sh"
    script.write_text(
        "#!/bin/bash\npython3 /tests/test_outputs.py && r=1 || r=0\n"
        'echo "{\\"reward\\": $r}" > /logs/verifier/reward.json\n'
    )
    assert lint_task(task).ok


def test_output_named_only_by_file_name_is_accepted(tmp_path: Path):
    """`top_words.txt` in prose is enough; the test's full path need not be spelled out."""
    task = _copy(GOOD, tmp_path)
    instruction = task / "instruction.md"
    instruction.write_text(
        instruction.read_text().replace("`/app/top_words.txt`", "`top_words.txt`")
    )
    assert lint_task(task).ok


def test_path_joined_in_python_is_checked(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    checks = task / "tests" / "test_outputs.py"
    checks.write_text(
        checks.read_text().replace(
            "    return 0\n\n\nif __name__",
            '    if not (Path("/app/results") / "stats.json").exists():\n'
            "        return 1\n    return 0\n\n\nif __name__",
        )
    )
    report = lint_task(task)
    assert _rules(report) == {"output-not-in-instruction"}
    assert "/app/results/stats.json" in report.errors[0].message


def test_all_problems_reported_in_one_pass(tmp_path: Path):
    """A proposer gets every defect at once, not one per revision."""
    task = _copy(GOOD, tmp_path)
    (task / "solution" / "solve.sh").write_bytes(b"#!/bin/bash\r\necho crlf\r\n")
    (task / "tests" / "test.sh").write_text("#!/bin/bash\npython3 /tests/test_outputs.py\n")
    with (task / "environment" / "Dockerfile").open("a") as f:
        f.write("EXPOSE 80\n")
    assert _rules(lint_task(task)) == {
        "task-format",
        "no-reward-file",
        "dockerfile-unsupported-instruction",
    }


def test_undecodable_files_give_findings_not_tracebacks(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    (task / "environment" / "Dockerfile").write_bytes(b"FROM debian:bookworm\nRUN echo \xff\n")
    (task / "tests" / "test.sh").write_bytes(b"#!/bin/bash\necho \xfe\n")
    report = lint_task(task)
    assert {(f.rule, f.file) for f in report.errors} == {
        ("task-format", "environment/Dockerfile"),
        ("task-format", "tests/test.sh"),
    }
    assert all("UTF-8" in f.message for f in report.errors)
