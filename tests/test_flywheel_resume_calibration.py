"""A resumed admission replaces the calibration rollouts its killed predecessor recorded."""

from __future__ import annotations

from autoenvscaling.graphs.flywheel.admission import _drop_unjudged_calibration
from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.run_dir import RunDir


def _attempt(id: str, *, round: int, purpose: str, task: str = "r01-p0") -> Attempt:
    return Attempt(
        id=id,
        run_id="run",
        round=round,
        task_id=task,
        outcome="failed",
        reward=0.0,
        metadata={"purpose": purpose, "candidate": task},
    )


def test_only_this_candidates_calibration_in_this_round_is_dropped(tmp_path):
    run = RunDir(tmp_path)
    with RolloutStore(run.rollouts) as store:
        for attempt in (
            _attempt("stale-1", round=1, purpose="calibration"),
            _attempt("stale-2", round=1, purpose="calibration"),
            _attempt("earlier-round", round=0, purpose="calibration"),
            _attempt("other-candidate", round=1, purpose="calibration", task="r01-p1"),
            _attempt("refresh", round=1, purpose="refresh"),
        ):
            store.record_attempt(attempt, [Step(index=0, tool_output="ls")])

    _drop_unjudged_calibration(run, "run", 1, "r01-p0")

    with RolloutStore(run.rollouts) as store:
        left = sorted(a.id for a in store.list_attempts(limit=100))
        assert left == ["earlier-round", "other-candidate", "refresh"]
        assert all(store.trajectory(i).steps for i in left)


def test_a_run_without_a_store_yet_is_left_alone(tmp_path):
    run = RunDir(tmp_path)
    _drop_unjudged_calibration(run, "run", 1, "r01-p0")
    assert not run.rollouts.exists()
