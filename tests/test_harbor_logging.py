"""Quiet as a library (issue 43, item 5): a real Harbor trial run from an app that configured
logging the usual way shows that app no ERROR for a normal trial and nothing below its levels,
while the trial's own log file keeps Harbor's debug lines. Checked at the app's root handler,
where an embedding app meets the records."""

from __future__ import annotations

import logging

import pytest

from autoenvscaling.tools.trials.trial import run_trial

from .conftest import FIXTURES

GOOD = FIXTURES / "good_task"
SOLVER = "autoenvscaling.tools.trials.script_agent:ScriptAgent"


class Caught(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.NOTSET)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def app_root():
    """The app's root logger at its default level (WARNING) with a handler that takes all."""
    root = logging.getLogger()
    caught = Caught()
    level = root.level
    root.addHandler(caught)
    root.setLevel(logging.WARNING)
    try:
        yield caught
    finally:
        root.removeHandler(caught)
        root.setLevel(level)
        logging.getLogger("harbor").setLevel(logging.NOTSET)


def harbor_records(caught: Caught) -> list[logging.LogRecord]:
    return [r for r in caught.records if r.name.startswith("harbor")]


@pytest.mark.timeout(600)
async def test_a_normal_trial_shows_the_app_nothing_below_its_level(
    engine_ready, app_root, tmp_path
):
    oracle = await run_trial(GOOD, agent="oracle", backend="podman", trials_dir=tmp_path / "o")
    ours = await run_trial(
        GOOD,
        agent=SOLVER,
        agent_kwargs={"use_solution": True, "task_dir": str(GOOD)},
        backend="podman",
        trials_dir=tmp_path / "s",
    )
    assert oracle.reward == 1.0 and ours.reward == 1.0, (oracle.error, ours.error)
    shown = harbor_records(app_root)
    assert [r for r in shown if r.levelno < logging.WARNING] == [], [r.getMessage() for r in shown]
    assert not [r for r in shown if "web search" in r.getMessage()], [r.getMessage() for r in shown]
    assert not [r for r in shown if r.levelno >= logging.ERROR], [r.getMessage() for r in shown]
    # The trial's own log still holds Harbor's debug lines (this one is logged at DEBUG).
    logs = [p.read_text() for p in (tmp_path / "o").rglob("trial.log")]
    assert logs and any("Collecting main service artifacts" in text for text in logs), logs
    assert not any("web search" in text for text in logs), logs


@pytest.mark.timeout(600)
async def test_an_app_that_asks_for_harbors_debug_gets_it(engine_ready, app_root, tmp_path):
    logging.getLogger("harbor").setLevel(logging.DEBUG)
    outcome = await run_trial(GOOD, agent="nop", backend="podman", trials_dir=tmp_path / "n")
    assert outcome.reward == 0.0, outcome.error
    assert [r for r in harbor_records(app_root) if r.levelno < logging.WARNING]
