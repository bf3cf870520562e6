"""Harbor's own linter (`harbor lint`, its default rules) finds nothing in the seed pool or in a
task the proposer emits; with `--select ALL` it adds only the two rules we do not adopt.

Not adopted, on purpose:
- `root-agent`: the agent runs as the image's root, as in Terminal-Bench. Tasks install packages,
  fix permissions and edit system files; root inside the container is bounded by the engine's
  profile (dropped capabilities, seccomp, no network), and since the verifier runs in a fresh
  container, the agent's root reaches nothing the tests use.
- `unpinned-image`: `FROM debian:bookworm-slim` names the project's offline base (debootstrap,
  imported once per machine, no registry). A SHA-256 digest would name one registry's build and
  could not be resolved offline; the base is pinned by its rootfs content instead.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from harbor.lint import lint_task
from harbor.lint.models import DEFAULT_RULES, LintRule

from autoenvscaling.tools.gate.results import StageResult, make_verdict
from autoenvscaling.tools.tasks.file_blocks import parse_file_blocks
from autoenvscaling.tools.tasks.format import write_task
from autoenvscaling.tools.trials.verifier import default_to_separate, verifier_mode

from .conftest import seed_tasks
from .flywheel_policy import FILES, blocks

NOT_ADOPTED = {LintRule.ROOT_AGENT, LintRule.UNPINNED_IMAGE}
HARBOR = [sys.executable, "-c", "from harbor.cli.main import app; app()"]


def _findings(task: Path, rules: set[LintRule]) -> list[str]:
    return [f"{f.rule} {f.path}: {f.message}" for f in lint_task(task, selected_rules=rules)]


@pytest.fixture
def emitted(tmp_path) -> Path:
    """A task as the proposer writes it: its reply's file blocks, then the verifier default."""
    candidate = tmp_path / "candidate"
    write_task(parse_file_blocks(blocks(FILES)), candidate)
    assert default_to_separate(candidate)  # the scripted reply states no verifier mode
    return candidate


def test_seed_pool_is_clean_under_harbor_lint_defaults():
    tasks = seed_tasks()
    assert len(tasks) >= 17
    found = {t.name: _findings(t, set(DEFAULT_RULES)) for t in tasks}
    assert not any(found.values()), json.dumps(found, indent=1)
    assert {t.name: verifier_mode(t) for t in tasks} == {t.name: "separate" for t in tasks}


def test_emitted_task_is_clean_and_on_the_separate_verifier(emitted):
    assert _findings(emitted, set(DEFAULT_RULES)) == []
    config = tomllib.loads((emitted / "task.toml").read_text())
    assert config["verifier"]["environment_mode"] == "separate"
    assert config["artifacts"] == ["/app"]  # the Dockerfile's WORKDIR
    assert config["verifier"]["timeout_sec"] == 60  # the author's settings are kept


def test_harbor_lint_cli_agrees(emitted):
    """The real `harbor lint` command: exit 0 on the pool and the emitted task; with --select ALL
    every finding is one of the two rules we do not adopt."""
    targets = [str(t) for t in [*seed_tasks(), emitted]]
    clean = subprocess.run([*HARBOR, "lint", "--json", *targets], capture_output=True, text=True)
    assert clean.returncode == 0, clean.stdout[-3000:] + clean.stderr[-2000:]
    assert json.loads(clean.stdout or "[]") == []
    every = subprocess.run(
        [*HARBOR, "lint", "--json", "--select", "ALL", *targets], capture_output=True, text=True
    )
    rules = {finding["rule"] for finding in json.loads(every.stdout)}
    assert rules == {str(r) for r in NOT_ADOPTED}, every.stdout[-3000:]


def test_a_stated_mode_is_kept(tmp_path):
    """A task that opts into the shared verifier (to check system state) is left as written;
    Harbor's default rules then name it, and the gate marks it (Verdict.verifier_mode)."""
    task = tmp_path / "shared"
    write_task(parse_file_blocks(blocks(FILES)), task)
    toml = task / "task.toml"
    toml.write_text(
        toml.read_text().replace("[verifier]\n", '[verifier]\nenvironment_mode = "shared"\n')
    )
    before = toml.read_text()
    assert not default_to_separate(task)
    assert toml.read_text() == before and verifier_mode(task) == "shared"
    assert [f.rule for f in lint_task(task, selected_rules=set(DEFAULT_RULES))] == [
        LintRule.SHARED_VERIFIER
    ]
    # The gate's verdict says which tasks rely on a shared verifier.
    lint_stage = StageResult(stage="lint", passed=True, reason="ok")
    assert make_verdict(task, [lint_stage]).verifier_mode == "shared"
    assert make_verdict(seed_tasks()[0], [lint_stage]).verifier_mode == "separate"


def test_default_added_without_a_verifier_table(tmp_path):
    task = tmp_path / "bare"
    write_task(parse_file_blocks(blocks(FILES)), task)
    toml = task / "task.toml"
    text = toml.read_text()
    toml.write_text(text[: text.index("[verifier]")] + text[text.index("[environment]") :])
    assert default_to_separate(task)
    config = tomllib.loads(toml.read_text())
    assert config["verifier"] == {"environment_mode": "separate"}
    assert config["artifacts"] == ["/app"] and verifier_mode(task) == "separate"
