"""Tasks written the way real Harbor / Terminal-Bench 2 tasks are (tests/fixtures/real_tasks/,
our own files reproducing each convention met in public task sets): schema 1.0 with [metadata]
time estimates and `memory = "2G"`, schema 1.1 with [task] name, [[task.authors]], a key Harbor
ignores, artifacts, gpus = 0, allow_internet and empty env tables; solve.sh without a shebang;
a verifier that copies a helper into /app, writes a probe file and excludes its own files; a
verifier that downloads its runner; a build that installs from the internet.

Fast tests read the static stage; the slow ones run the gate with real trials: the first two
are admitted up to calibrate, the fetching ones rejected with a verdict naming the need.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.tools.gate import GateConfig
from autoenvscaling.tools.gate.lint import lint_task
from autoenvscaling.tools.gate.lint.written_paths import is_written, written_by_verifier
from autoenvscaling.tools.gate.network import declares_internet, fetches, network_need
from autoenvscaling.tools.gate.pipeline import run_stage, validate_task
from autoenvscaling.tools.tasks.format import load_task
from autoenvscaling.tools.tasks.limits import TaskLimits

from .conftest import FIXTURES

REAL = FIXTURES / "real_tasks"
GOOD = FIXTURES / "good_task"


def _copy(src: Path, tmp_path: Path) -> Path:
    dest = tmp_path / src.name
    shutil.copytree(src, dest)
    return dest


def _warned(task: Path) -> set[str]:
    return {f.rule for f in lint_task(task, backend="podman").warnings}


def test_schema_1_0_loads_with_its_legacy_sizes():
    task = load_task(REAL / "tb20_schema")
    assert task.config.schema_version == "1.0"
    assert task.config.environment.memory_mb == 2048  # memory = "2G"
    assert task.config.environment.storage_mb == 4096
    assert task.config.metadata["expert_time_estimate_min"] == 5.0
    report = lint_task(REAL / "tb20_schema", backend="podman")
    assert report.ok, report.summary()
    # solve.sh starts with a comment: a warning that says why it still runs, never an error
    assert _warned(REAL / "tb20_schema") == {"shebang"}
    (shebang,) = report.warnings
    assert shebang.file == "solution/solve.sh" and "through bash" in shebang.message


def test_schema_1_1_loads_with_package_info_and_empty_tables():
    task = load_task(REAL / "tb21_schema")
    assert task.name == "autoenvscaling/reverse-lines"
    assert task.config.task is not None and task.config.task.authors[0].name == "autoenvscaling"
    report = lint_task(REAL / "tb21_schema", backend="podman")
    assert report.ok, report.summary()
    # `format` under [task] is ignored by Harbor: said, not rejected; the helper the verifier
    # copies into /app and the probe it writes are not outputs the instruction must name
    assert "descriptive-field" in _warned(REAL / "tb21_schema")
    assert "output-not-in-instruction" not in {f.rule for f in report.findings}


def test_an_unknown_key_that_changes_a_run_is_still_an_error(tmp_path: Path):
    task = _copy(REAL / "tb21_schema", tmp_path)
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(toml.replace("[agent]\n", "[agent]\ntimout_sec = 60.0\n"))
    report = lint_task(task)
    assert not report.ok and "agent.timout_sec" in report.errors[0].message


def test_verifier_written_paths():
    sources = [
        (Path("test.sh"), (REAL / "tb21_schema" / "tests" / "test.sh").read_text()),
        (Path("x.py"), 'OUT = Path("/app/probe.json")\nOUT.write_text("{}")\n'),
        (Path("y.sh"), "rm -f /app/output.txt\nkotlinc a.kt -d /app/sim.jar\n[ -d /app/out ]\n"),
    ]
    written = written_by_verifier(sources)
    for path in ("/app/compare.sh", "/app/.verifier_probe", "/app/probe.json", "/app/sim.jar"):
        assert is_written(path, written, "/app"), (path, written)
    assert is_written("/app/output.txt", written, "/app")  # cleared, then re-made by the tests
    assert not is_written("/app/out", written, "/app")  # `[ -d ... ]` only reads
    assert not is_written("/app/reversed.txt", written, "/app")  # the agent's answer


def test_an_output_the_tests_only_read_is_still_unnamed(tmp_path: Path):
    task = _copy(REAL / "tb21_schema", tmp_path)
    with (task / "tests" / "test_outputs.py").open("a") as f:
        f.write('assert Path("/app/summary.json").exists()\n')
    report = lint_task(task)
    hits = [f for f in report.errors if f.rule == "output-not-in-instruction"]
    assert hits and "/app/summary.json" in hits[0].message and "unsolvable" in hits[0].message


def test_pip_option_values_are_not_packages(tmp_path: Path):
    task = _copy(GOOD, tmp_path)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(
        dockerfile.read_text() + "RUN pip install --no-cache-dir --retries 3 requests==2.32.3\n"
    )
    assert "unpinned-python-dependency" not in {f.rule for f in lint_task(task).findings}
    dockerfile.write_text(dockerfile.read_text() + "RUN pip install --retries 3 pytest\n")
    hits = [f for f in lint_task(task).warnings if f.rule == "unpinned-python-dependency"]
    assert len(hits) == 1 and "`pytest`" in hits[0].message and "`3`" not in hits[0].message


def test_what_the_backend_cannot_honour_is_named(tmp_path: Path):
    task = _copy(REAL / "tb21_schema", tmp_path)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("gpus = 0", "gpus = 1"))
    (task / "environment" / "docker-compose.yaml").write_text("services:\n  main:\n    build: .\n")
    gpu_limits = TaskLimits(max_gpus=2)  # the default (0) rejects any GPU task as a limit
    report = lint_task(task, gpu_limits, backend="podman")
    errors = [f for f in report.errors if f.rule == "cannot-honour"]
    messages = " ".join(f.message for f in errors)
    assert "gpus = 1" in messages and "harbor:<type>" in messages
    assert "compose" in messages and "--backend harbor-docker" in messages
    # on a backend that can, or with no backend named, nothing to honour is missing
    assert not [f for f in lint_task(task, gpu_limits).errors if f.rule == "cannot-honour"]
    # under the default limits the GPU is a limit, reported once
    default = lint_task(task, backend="podman").errors
    assert [f.rule for f in default if "gpus" in f.message] == ["task-limits"]


def test_a_multi_step_task_is_one_error_naming_its_steps(tmp_path: Path):
    task = tmp_path / "steps_task"
    (task / "steps" / "one").mkdir(parents=True)
    (task / "task.toml").write_text(
        'schema_version = "1.4"\n\n[[steps]]\nname = "one"\ndependencies = []\n\n'
        '[[steps]]\nname = "two"\ninherit_prior_session = true\n'
    )
    report = lint_task(task)
    assert [f.rule for f in report.errors] == ["task-format"], report.summary()
    message = report.errors[0].message
    assert "2 [[steps]]: one, two" in message and "harbor run" in message


def test_network_needs_are_found_by_phase():
    runner = network_need(REAL / "downloads_runner")
    assert runner.declared and not runner.granted
    assert [u.what for u in runner.uses] == ["downloads uv", "fetches its Python tools with uvx"]
    assert {u.phase for u in runner.uses} == {"verifier"}
    assert runner.uses[0].file == "tests/test.sh" and runner.uses[0].line == 3
    build = network_need(REAL / "installs_in_build", allow_internet=True)
    assert [(u.phase, u.line) for u in build.uses] == [("build", 3)] and build.granted
    assert not network_need(GOOD).uses and not declares_internet(GOOD)
    # Harbor's implicit default (network_mode "public") is not a declaration
    assert not declares_internet(REAL / "tb20_schema")
    assert [w for _l, w, _c in fetches("pip install --no-index --find-links /w x==1")] == []
    assert [w for _l, w, _c in fetches("apt-get update && \\\n apt-get install -y git")] == [
        "runs apt"
    ]


async def test_the_lint_stage_records_the_network_policy():
    result = await run_stage("lint", REAL / "downloads_runner", GateConfig())
    network = result.details["network"]
    assert network["declared"] and not network["allowed_by_policy"] and not network["granted"]
    allowed = await run_stage("lint", REAL / "downloads_runner", GateConfig(allow_internet=True))
    assert allowed.details["network"]["granted"]


# --------------------------------------------------------------------------- real trials

LATER = ["calibrate"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["tb20_schema", "tb21_schema"])
async def test_real_conventions_are_admitted_up_to_calibrate(engine_ready, name: str):
    verdict = await validate_task(REAL / name, GateConfig(trial_concurrency=3))
    assert verdict.admitted, verdict.summary()
    assert verdict.network is not None and not verdict.network["granted"]


@pytest.mark.slow
async def test_a_verifier_that_downloads_its_runner_is_named_not_blamed(engine_ready):
    verdict = await validate_task(REAL / "downloads_runner", GateConfig(trial_concurrency=2))
    assert not verdict.admitted and verdict.stage == "oracle", verdict.summary()
    assert "its verifier needs the internet" in verdict.reason
    assert "downloads uv" in verdict.reason and "--allow-internet" in verdict.reason
    assert "fix the solution" not in verdict.reason


@pytest.mark.slow
async def test_a_build_that_installs_from_the_internet_is_named(engine_ready):
    verdict = await validate_task(REAL / "installs_in_build", GateConfig())
    assert not verdict.admitted and verdict.stage == "build", verdict.summary()
    assert "its Dockerfile needs the internet" in verdict.reason
    assert "environment/Dockerfile:3" in verdict.reason


@pytest.mark.slow
async def test_a_granted_task_has_a_network_in_build_agent_and_verifier(engine_ready):
    # Its build, solution and tests all need a network device; none ever leaves loopback.
    config = GateConfig(allow_internet=True, repeat=1, verifier_reruns=2)
    verdict = await validate_task(
        REAL / "granted_network", config, skip=("anti_cheat", "calibrate")
    )
    assert verdict.admitted, verdict.summary()
    assert verdict.network is not None and verdict.network["granted"]
    refused = await validate_task(REAL / "granted_network", GateConfig(), skip=("calibrate",))
    # No grant: no network at all (the image, when the granted run built it already, is the
    # same content and comes from the cache; the solution then finds no network device).
    assert refused.stage in ("build", "oracle") and not refused.admitted, refused.summary()
    assert refused.network is not None and not refused.network["allowed_by_policy"]


def test_prose_and_programs_are_not_outputs(tmp_path: Path):
    task = _copy(REAL / "tb21_schema", tmp_path)
    with (task / "tests" / "test_outputs.py").open("a") as f:
        f.write('\n\ndef test_doc():\n    """The top path is /index.html, not /about.html."""\n')
    with (task / "tests" / "test.sh").open("a") as f:
        f.write("/opt/venv/bin/python -c 'print(1)'\n")
    report = lint_task(task)
    assert "output-not-in-instruction" not in {f.rule for f in report.findings}, report.summary()
