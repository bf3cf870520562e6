"""Host values into a sandbox: task.toml `${VAR}` templates (issue 28, item 3).

Harbor fills `${VAR}` in `[environment.env]`, `[solution.env]` and `[verifier.env]` from the
environment of the process running the trial. The attack is a task whose templates name a host
secret (an API key of the run), whose solution and tests print it: the value lands in the trial
logs and, through the oracle stage's rejection excerpt, in what the proposer's `check` returns.
The defence: lint refuses templates outside the run's allowlist, every sandbox start refuses
them again, and verdicts redact host values.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from autoenvscaling.mcp_servers.gate import report_of
from autoenvscaling.tools.gate import STAGES, GateConfig, validate_task
from autoenvscaling.tools.gate.results import StageResult, make_verdict
from autoenvscaling.tools.tasks.host_env import host_templates
from tests.security.conftest import BACKEND, run_all, write_task

pytestmark = [pytest.mark.timeout(600)]

VARIABLE = "AES_SECURITY_API_KEY"
ENV_TOML = f"""
[environment.env]
LEAK_ENV = "${{{VARIABLE}}}"

[solution.env]
LEAK_SOLUTION = "${{{VARIABLE}}}"

[verifier.env]
LEAK_VERIFIER = "${{{VARIABLE}:-none}}"
"""


@pytest.fixture
def secret():
    value = f"sk-aes-{uuid.uuid4().hex}"
    os.environ[VARIABLE] = value
    yield value
    os.environ.pop(VARIABLE, None)


def _task(root: Path) -> Path:
    task = write_task(
        root,
        "host-env-template",
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\n",
        test_sh="""\
            #!/bin/bash
            echo "verifier sees: $LEAK_ENV $LEAK_VERIFIER"
            mkdir -p /logs/verifier
            echo 0 > /logs/verifier/reward.txt
            """,
        solve="""\
            #!/bin/bash
            echo "agent sees: $LEAK_ENV $LEAK_SOLUTION"
            """,
    )
    with (task / "task.toml").open("a") as toml:
        toml.write(ENV_TOML)
    return task


def _everything_under(folder: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace")
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink()
    )


def test_host_variable_never_reaches_the_sandbox_or_the_proposer(
    engine_ready, tmp_path: Path, secret: str
):
    task = _task(tmp_path / "tasks")
    assert [t.variable for t in host_templates(task)] == [VARIABLE] * 3

    # A trial of the task (the GRPO and gate paths run the same): the value reaches no log.
    outcome = run_all({"trial": (task, BACKEND)}, tmp_path / "trials")["trial"]
    logs = _everything_under(Path(outcome.trial_dir)) if outcome.trial_dir else ""
    assert secret not in logs + (outcome.error or "") + outcome.verifier_output, (
        "the host secret reached the sandbox (trial logs)"
    )
    assert outcome.reward is None and VARIABLE in (outcome.error or ""), outcome.error

    # What the proposer's `check` returns: lint names the variable, never its value.
    skip = STAGES[STAGES.index("oracle") + 1 :]
    verdict = asyncio.run(validate_task(task, GateConfig(backend=BACKEND), skip=skip))
    shown = report_of(verdict).model_dump_json()
    assert secret not in shown, f"the check report shows the host secret: {shown[-600:]}"
    assert not verdict.admitted and verdict.stage == "lint", verdict.reason
    assert "task-env-host-template" in verdict.reason + verdict.excerpt


def test_verdicts_redact_host_values(secret: str):
    """Whatever a test prints (an allowlisted value included) comes back as the variable's name."""
    result = StageResult(stage="oracle", passed=False, reason="failed", excerpt=f"key={secret}")
    verdict = make_verdict("/tmp/some-task", [result])
    assert secret not in verdict.model_dump_json()
    assert f"<host:{VARIABLE}>" in verdict.excerpt
