"""The run's progress lines read the flywheel's node updates as models (graphs/flywheel/state.py):
one line per node, with the candidate's verdict, the training headline and the round's numbers."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest

from autoenvscaling.cli.run import _stream
from autoenvscaling.graphs.flywheel.state import TrainingSummary
from autoenvscaling.tools.report.metrics import CandidateRecord, RoundMetrics

pytestmark = pytest.mark.timeout(30)


class _Run:
    """An opened run (graphs/lifecycle.py: OpenRun) whose stream is the updates a round's nodes
    return, as `astream(stream_mode="updates")` gives them."""

    payload = None

    def __init__(self, chunks: list[dict[str, Any]]) -> None:
        self.chunks = chunks

    async def astream(self, *args: Any, **kwargs: Any) -> AsyncIterator[dict[str, Any]]:
        for chunk in self.chunks:
            yield chunk


class _Bar:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.rounds = 0

    def print(self, line: str) -> None:
        self.lines.append(re.sub(r"^\[\s*[\d.]+s\] ", "", line))

    def status(self, node: str) -> None:
        pass

    def advance(self) -> None:
        self.rounds += 1


async def test_progress_lines_name_what_each_node_did() -> None:
    rejected = CandidateRecord(
        round=1, slot=1, revision=2, path="/c", task_id="r01-c", stage="oracle", reason="x" * 200
    )
    admitted = CandidateRecord(
        round=1, slot=0, revision=0, path="/d", task_id="r01-d", admitted=True
    )
    chunks = [
        {"admit_one": {"candidates": [admitted]}},
        {"admit_one": {"candidates": [rejected]}, "__metadata__": {"cached": True}},
        {"train": {"training": TrainingSummary(solver={"reason": "skipped"})}},
        {"train": {"training": TrainingSummary(solver={"checkpoint": "ck-1", "reason": "r"})}},
        {
            "refresh": {
                "metrics": [
                    RoundMetrics(round=1, admitted=1, scored=2, solver_mean_reward_pool=0.5)
                ]
            }
        },
    ]
    bar = _Bar()
    await _stream(_Run(chunks), True, bar)  # type: ignore[arg-type]
    assert bar.lines == [
        "admit_one slot 0 rev 0: admitted",
        f"admit_one slot 1 rev 2: rejected at oracle: {'x' * 90} (from the checkpoint)",
        "train skipped",
        "train ck-1",
        "refresh round 1 done: 1/2 admitted, solver mean on pool 0.5",
    ]
    assert bar.rounds == 1
