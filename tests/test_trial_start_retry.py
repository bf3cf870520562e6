"""A trial whose sandbox did not start is run once more in a fresh one; a task's own failure is not.

CI saw Harbor's podman type lose the container it had just created (`up` succeeded, then 90 s of
"no such container"), and the gate called the task "not judged". The engine's side of that is
injected here (the environment's `start` raises once); the trials, the task and the engine that
then runs it are real.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from autoenvscaling.tools.sandbox.harbor_env import HardenedPodmanEnvironment
from autoenvscaling.tools.trials import trial as trials
from autoenvscaling.tools.trials.trial import run_trial

FIXTURES = Path(__file__).parent / "fixtures"
LOST = "Container did not become ready for exec within 90s: no such container"


def flaky_start(monkeypatch, failures: int) -> list[int]:
    """Make the environment's start fail `failures` times, then start for real; count calls."""
    real = HardenedPodmanEnvironment.start
    calls: list[int] = []

    async def start(self, force_build: bool) -> None:
        calls.append(1)
        if len(calls) <= failures:
            raise RuntimeError(LOST)
        await real(self, force_build)

    monkeypatch.setattr(HardenedPodmanEnvironment, "start", start)
    return calls


def good_task(tmp_path: Path) -> Path:
    task = tmp_path / "word-count"
    shutil.copytree(FIXTURES / "good_task", task)
    return task


async def test_a_sandbox_lost_at_start_is_tried_again_and_scored(
    engine_ready, tmp_path, monkeypatch
):
    calls = flaky_start(monkeypatch, failures=1)
    outcome = await run_trial(good_task(tmp_path), agent="oracle", trials_dir=tmp_path / "trials")
    assert (outcome.reward, outcome.error, outcome.start_retries) == (1.0, None, 1), outcome
    assert len(calls) == 2
    # The lost attempt's folder is kept beside the scored one, as evidence.
    assert len([p for p in (tmp_path / "trials").iterdir() if p.is_dir()]) == 2


async def test_a_sandbox_that_never_starts_is_tried_once_more_then_infrastructure(
    engine_ready, tmp_path, monkeypatch
):
    calls = flaky_start(monkeypatch, failures=99)
    outcome = await run_trial(good_task(tmp_path), agent="oracle", trials_dir=tmp_path / "trials")
    assert outcome.reward is None and outcome.error_kind == "infrastructure", outcome
    assert LOST in (outcome.error or "")
    assert (outcome.start_retries, outcome.agent_started, len(calls)) == (1, False, 2)


async def test_a_task_that_does_not_build_is_not_tried_again(engine_ready, tmp_path, monkeypatch):
    task = good_task(tmp_path)
    dockerfile = task / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "\nRUN exit 3\n")
    calls = flaky_start(monkeypatch, failures=0)
    outcome = await run_trial(task, agent="oracle", trials_dir=tmp_path / "trials")
    assert outcome.reward is None and outcome.error_kind == "build", outcome
    assert (outcome.start_retries, len(calls)) == (0, 1)


async def test_a_failure_after_the_agent_started_is_not_tried_again(engine_ready, tmp_path):
    # The verifier writes no reward: the task's fault, found after the agent ran.
    task = good_task(tmp_path)
    (task / "tests" / "test.sh").write_text("#!/bin/bash\nexit 0\n")
    outcome = await run_trial(task, agent="oracle", trials_dir=tmp_path / "trials")
    assert outcome.reward is None and outcome.agent_started is True, outcome
    assert outcome.start_retries == 0


@pytest.mark.parametrize(
    ("error_kind", "agent_started", "retried"),
    [("infrastructure", False, True), ("build", False, False), ("infrastructure", None, False)],
)
def test_only_an_unstarted_sandbox_counts_as_not_started(error_kind, agent_started, retried):
    outcome = trials.TrialOutcome(
        task="t",
        task_name="t",
        agent="oracle",
        backend="podman",
        reward=None,
        error="x",
        error_kind=error_kind,
        agent_started=agent_started,
    )
    assert trials.did_not_start(outcome) is retried
