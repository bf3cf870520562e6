"""The Harbor task model: real task folders on disk, loaded, written and broken on purpose."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pytest
from harbor.models.task.config import TaskConfig
from pydantic import ValidationError

from autoenvscaling.tools.tasks.format import (
    HarborTask,
    TaskFormatError,
    TaskSpec,
    check_task,
    load_pool,
    load_task,
    write_task,
)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
GOOD = FIXTURES / "good_task"
BAD = FIXTURES / "bad_tasks"

# folder -> (file the error names, field or None, words the problem must contain)
FORMAT_DEFECTS: dict[str, tuple[str, str | None, list[str]]] = {
    "invalid_toml": ("task.toml", None, ["invalid TOML", "line 3"]),
    "bad_field_type": ("task.toml", "agent.timeout_sec", ["valid number", "five minutes"]),
    "unknown_field": ("task.toml", "agent.timeout_secs", ["unknown field", "'timeout_sec'"]),
    "missing_instruction": ("instruction.md", None, ["missing", "add instruction.md"]),
    "empty_instruction": ("instruction.md", None, ["is empty"]),
    "non_utf8_instruction": ("instruction.md", None, ["not valid UTF-8", "0xe9", "offset 42"]),
    "missing_test_sh": ("tests/test.sh", None, ["missing", "reward.txt"]),
    "missing_dockerfile": ("environment/Dockerfile", None, ["missing", "docker_image"]),
    "multi_step": ("task.toml", "steps", ["multi-step"]),
    "script_crlf": ("solution/solve.sh", "line endings", ["CRLF"]),
}


def _copy(src: Path, tmp_path: Path, name: str | None = None) -> Path:
    dest = tmp_path / (name or src.name)
    shutil.copytree(src, dest)
    return dest


def test_good_task_loads_with_its_parts():
    task = load_task(GOOD)
    assert task.name == "good_task"
    assert task.category == "text-processing"
    assert task.difficulty == "easy"
    assert task.config.agent.timeout_sec == 300.0
    assert task.instruction.startswith("A text file is waiting")
    assert task.dockerfile == GOOD.resolve() / "environment" / "Dockerfile"
    assert task.test_script.name == "test.sh" and task.test_script.is_file()
    assert task.solve_script is not None and task.solve_script.is_file()
    assert check_task(GOOD) == []


@pytest.mark.parametrize("folder", sorted(FORMAT_DEFECTS))
def test_each_bad_folder_gives_a_specific_error(folder: str):
    file, field, words = FORMAT_DEFECTS[folder]
    root = (BAD / folder).resolve()
    with pytest.raises(TaskFormatError) as info:
        load_task(root)
    err = info.value
    assert err.path == root / file
    assert err.field == field
    for word in words:
        assert word in err.problem, (word, str(err))
    # the message is "FILE: FIELD: PROBLEM", something a person can act on
    prefix = f"{root / file}: {field}: " if field else f"{root / file}: "
    assert str(err) == prefix + err.problem


def test_bad_folders_cover_at_least_ten_kinds():
    assert len(FORMAT_DEFECTS) >= 10
    assert all((BAD / name).is_dir() for name in FORMAT_DEFECTS)


def test_missing_and_non_folder_paths(tmp_path: Path):
    with pytest.raises(TaskFormatError, match="task folder does not exist"):
        load_task(tmp_path / "nope")
    file = tmp_path / "file.txt"
    file.write_text("x")
    with pytest.raises(TaskFormatError, match="is not a folder"):
        load_task(file)


def test_check_task_lists_every_problem_at_once(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    (task / "instruction.md").unlink()
    (task / "tests" / "test.sh").write_bytes(b"#!/bin/bash\r\necho crlf\r\n")
    problems = {(e.path.name, e.field) for e in check_task(task)}
    assert problems == {("instruction.md", None), ("test.sh", "line endings")}


def test_docker_image_replaces_the_dockerfile(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    (task / "environment" / "Dockerfile").unlink()
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(
        toml.replace("[environment]\n", '[environment]\ndocker_image = "python:3.12-slim"\n')
    )
    loaded = load_task(task)
    assert loaded.dockerfile is None
    assert loaded.config.environment.docker_image == "python:3.12-slim"


def test_crlf_shebang_is_named(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    script = task / "tests" / "test.sh"
    script.write_bytes(script.read_bytes().replace(b"\n", b"\r\n"))
    with pytest.raises(TaskFormatError) as info:
        load_task(task)
    assert info.value.field == "line endings" and "CRLF" in info.value.problem


def test_solution_folder_without_solve_sh(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    (task / "solution" / "solve.sh").unlink()
    with pytest.raises(TaskFormatError) as info:
        load_task(task)
    assert info.value.path.name == "solve.sh" and "solution/ exists" in info.value.problem


def test_no_solution_folder_is_fine(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    shutil.rmtree(task / "solution")
    loaded = load_task(task)
    assert loaded.solution_dir is None and loaded.solve_script is None


def test_symlink_out_of_the_task_is_rejected(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    (task / "tests" / "data.txt").symlink_to(secret)
    with pytest.raises(TaskFormatError) as info:
        load_task(task)
    assert info.value.path == task.resolve() / "tests" / "data.txt"
    assert "is a symlink" in info.value.problem


def test_content_hash_is_stable_and_tracks_every_file(tmp_path: Path):
    a = load_task(_copy(GOOD, tmp_path, "a"))
    b = load_task(_copy(GOOD, tmp_path, "b"))
    assert a.content_hash() == b.content_hash() == load_task(GOOD).content_hash()
    (b.root / "environment" / "input.txt").write_text("changed\n")
    changed = b.content_hash()
    assert changed != a.content_hash()
    (b.root / "tests" / "__pycache__").mkdir()
    (b.root / "tests" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    assert b.content_hash() == changed  # interpreter droppings do not count
    (b.root / "solution" / "solve.sh").chmod(0o644)
    assert b.content_hash() != changed  # the exec bit changes how a script runs


def spec_of(task: HarborTask) -> TaskSpec:
    """The task's files as a `TaskSpec`, as a proposer writes them."""
    trees: dict[str, dict[str, str | bytes]] = {"environment": {}, "tests": {}, "solution": {}}
    for path in task.files():
        folder, _, rel = path.relative_to(task.root).as_posix().partition("/")
        if folder in trees and (folder, rel) != ("environment", "Dockerfile"):
            trees[folder][rel] = path.read_bytes()
    return TaskSpec(
        instruction=(task.root / "instruction.md").read_text(),
        task_toml=(task.root / "task.toml").read_text(),
        dockerfile=task.dockerfile.read_text() if task.dockerfile else None,
        environment_files=trees["environment"],
        tests=trees["tests"],
        solution=trees["solution"],
    )


def test_write_task_round_trip(tmp_path: Path):
    original = load_task(GOOD)
    spec = spec_of(original)
    assert "test.sh" in spec.tests and "input.txt" in spec.environment_files
    written = write_task(spec, tmp_path / "copy")
    assert written.content_hash() == original.content_hash()
    assert (written.root / "tests" / "test.sh").stat().st_mode & 0o111


def test_write_task_from_a_config_model(tmp_path: Path):
    config = TaskConfig.model_validate({"metadata": {"category": "git", "difficulty": "hard"}})
    spec = TaskSpec(
        instruction="Write `ok` to /app/out.txt.\n",
        config=config,
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\n",
        tests={"test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n"},
        solution={"solve.sh": "#!/bin/bash\necho ok > /app/out.txt\n"},
    )
    task = write_task(spec, tmp_path / "t")
    assert task.category == "git" and task.difficulty == "hard"
    assert (task.root / "task.toml").read_text().count("[metadata]") == 1


def test_write_task_reports_a_bad_spec_as_a_format_error(tmp_path: Path):
    spec = TaskSpec(
        instruction="Do it.",
        task_toml="[agent\n",
        dockerfile="FROM debian:bookworm-slim\n",
        tests={"test.sh": "#!/bin/bash\n"},
    )
    with pytest.raises(TaskFormatError) as info:
        write_task(spec, tmp_path / "t")
    assert info.value.path.name == "task.toml" and "invalid TOML" in info.value.problem


def test_write_task_will_not_clobber(tmp_path: Path):
    dest = tmp_path / "t"
    dest.mkdir()
    (dest / "keep.txt").write_text("mine")
    spec = spec_of(load_task(GOOD))
    with pytest.raises(TaskFormatError, match="already exists"):
        write_task(spec, dest)
    assert write_task(spec, dest, overwrite=True).name == "t"
    assert not (dest / "keep.txt").exists()


@pytest.mark.parametrize("name", ["../escape.sh", "/abs.sh", "a\\b.sh"])
def test_task_spec_rejects_paths_outside_the_folder(name: str):
    with pytest.raises(ValidationError, match="relative path inside the folder"):
        TaskSpec(instruction="x", tests={name: "#!/bin/bash\n"})


def test_task_spec_takes_one_config():
    with pytest.raises(ValidationError, match="either task_toml or config"):
        TaskSpec(instruction="x", tests={}, task_toml="", config=TaskConfig())


def test_load_pool_skips_and_collects_broken_tasks(tmp_path: Path):
    pool = tmp_path / "pool"
    pool.mkdir()
    _copy(GOOD, pool, "a_good")
    _copy(BAD / "invalid_toml", pool, "b_bad_toml")
    _copy(BAD / "missing_test_sh", pool, "c_no_test")
    (pool / ".hidden").mkdir()
    (pool / "notes.txt").write_text("not a task")
    errors: list[TaskFormatError] = []
    tasks = load_pool(pool, errors)
    assert [t.name for t in tasks] == ["a_good"]
    assert sorted(e.path.parent.name for e in errors) == ["b_bad_toml", "tests"]
    assert all(isinstance(t, HarborTask) for t in tasks)


def test_load_pool_of_a_missing_folder():
    with pytest.raises(TaskFormatError, match="task pool folder does not exist"):
        load_pool("/nonexistent/pool")


def test_error_survives_pickling():
    err = TaskFormatError("/x/task.toml", "agent.timeout_sec", "bad")
    back = pickle.loads(pickle.dumps(err))
    assert (back.path, back.field, back.problem, str(back)) == (
        err.path,
        err.field,
        err.problem,
        str(err),
    )


def test_every_bad_fixture_fails_with_a_typed_error_never_a_traceback():
    """Folders whose defect is not a format error must still load; the rest raise our type."""
    for folder in sorted(BAD.iterdir()):
        try:
            load_task(folder)
        except TaskFormatError as err:
            assert folder.name in FORMAT_DEFECTS, f"{folder.name}: unexpected {err}"
        else:
            assert folder.name not in FORMAT_DEFECTS, f"{folder.name} should not load"
