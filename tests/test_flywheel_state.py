"""Flywheel state holds models, and the run's SQLite checkpointer restores them as models: in a
new process-like saver on the same file, with no "unregistered type" warning, and refusing any
class the state does not declare."""

from __future__ import annotations

import logging
from pathlib import Path

import aiosqlite
import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from pydantic import BaseModel

from autoenvscaling.graphs.flywheel.builder import build_flywheel, checkpoint_serde
from autoenvscaling.graphs.models import Policy

pytestmark = pytest.mark.timeout(60)
CONFIG = {"configurable": {"thread_id": "t"}}


class Foreign(BaseModel):
    """A class no flywheel state declares: a checkpoint naming it must not construct it."""

    x: int = 1


async def test_policy_survives_the_sqlite_checkpointer_as_a_model(tmp_path: Path, caplog):
    db = str(tmp_path / "graph.sqlite")
    policy = Policy(model="openai:ck-1", checkpoint_id="ck-1", version="ck-1", base_url="http://x")
    async with aiosqlite.connect(db) as conn:
        graph = build_flywheel(checkpointer=AsyncSqliteSaver(conn, serde=checkpoint_serde()))
        await graph.aupdate_state(
            CONFIG, {"run_id": "r", "round": 2, "policy": policy}, as_node="setup"
        )
    caplog.set_level(logging.WARNING)
    async with aiosqlite.connect(db) as conn:  # a resumed run: a new saver on the same file
        graph = build_flywheel(checkpointer=AsyncSqliteSaver(conn, serde=checkpoint_serde()))
        values = (await graph.aget_state(CONFIG)).values
    assert isinstance(values["policy"], Policy) and values["policy"] == policy
    assert values["round"] == 2
    assert not [r for r in caplog.records if "unregistered" in r.getMessage()]


def test_the_checkpoint_serde_refuses_classes_the_state_does_not_declare():
    serde = checkpoint_serde()
    restored = serde.loads_typed(serde.dumps_typed(Foreign(x=3)))
    assert not isinstance(restored, Foreign)  # not constructed: blocked by the allowlist
    policy = Policy(model="openai:p")
    assert serde.loads_typed(serde.dumps_typed(policy)) == policy


@pytest.mark.parametrize(
    ("stored", "model"),
    [
        ("autoenvscaling.graphs.flywheel_state", "TrainingSummary"),
        ("autoenvscaling.graphs.validation", "ValidationState"),
    ],
)
def test_checkpoints_written_before_the_graph_packages_restore(monkeypatch, stored, model):
    """A run checkpointed before graphs/ had a package per graph names its state's models by the
    modules they lived in then: resuming it after the move restores them as models (stored data
    outlives a move). The class is written under its old module name, as such a checkpoint holds."""
    from autoenvscaling.graphs.flywheel import state
    from autoenvscaling.graphs.validation import builder

    cls = getattr(state, model, None) or getattr(builder, model)
    value = {
        "TrainingSummary": lambda: cls(solver={"reason": "skipped"}),
        "ValidationState": lambda: cls(task="/t"),
    }[model]()
    monkeypatch.setattr(cls, "__module__", stored)
    blob = checkpoint_serde().dumps_typed(value)
    monkeypatch.undo()
    assert stored.encode() in blob[1]
    restored = checkpoint_serde().loads_typed(blob)
    assert type(restored) is cls and restored == value


def test_harbor_trial_configs_name_the_solver_agent_by_its_stored_path():
    """Every trial's config.json names our agent `autoenvscaling.graphs.solver:SolverAgent`
    (graphs/solver/attempt.py: SOLVER_AGENT): Harbor imports it by that path."""
    import importlib

    from autoenvscaling.graphs.solver import SOLVER_AGENT
    from autoenvscaling.graphs.solver.harbor_agent import SolverAgent

    module, name = SOLVER_AGENT.split(":")
    assert SOLVER_AGENT == "autoenvscaling.graphs.solver:SolverAgent"
    assert getattr(importlib.import_module(module), name) is SolverAgent


def test_models_of_graphs_run_inside_nodes_are_restored_too():
    """The validation graph runs inside admit_one under the run's checkpointer: its state's
    models (Verdict, StageResult) are in the checkpoints too, and a resume must get them back
    as models (found by a kill-and-resume run that looped when they came back as dicts)."""
    from autoenvscaling.tools.gate.results import StageResult, Verdict

    serde = checkpoint_serde()
    verdict = Verdict(
        task="t",
        task_name="t",
        admitted=False,
        stage="lint",
        reason="r",
        proposer_reward=-1.0,
        stages=[StageResult(stage="lint", passed=False, reason="r")],
    )
    restored = serde.loads_typed(serde.dumps_typed(verdict))
    assert isinstance(restored, Verdict) and isinstance(restored.stages[0], StageResult)


def test_every_value_of_the_state_and_its_sends_is_restored_as_its_model():
    """Brief, candidates, training and metrics, and the items `propose` / `propose_one` send,
    are models: the checkpoint restores each as its class (nested models too), not a dict."""
    from autoenvscaling.graphs.flywheel.state import AdmitItem, TrainingSummary
    from autoenvscaling.graphs.proposer.settings import ProposalResult
    from autoenvscaling.tools.agents.brief import ProposerBrief, TaskRate
    from autoenvscaling.tools.gate.results import Verdict
    from autoenvscaling.tools.report.metrics import CandidateRecord, RoundMetrics

    serde = checkpoint_serde()
    brief = ProposerBrief(
        round=2,
        band=(0.2, 0.8),
        task_rates=[
            TaskRate(task_id="t", category="c", attempts=2, pass_rate=0.5, mean_reward=0.5)
        ],
    )
    verdict = Verdict(
        task="t", task_name="t", admitted=True, stage=None, reason="", proposer_reward=1.0
    )
    item = AdmitItem(
        slot=1,
        round=2,
        run_id="r",
        policy=Policy(model="openai:p"),
        brief=brief,
        candidate=ProposalResult(
            attempt_id="a",
            candidate="/c",
            arm="terminal",
            solver_feedback=True,
            reward=1.0,
            outcome="solved",
            verdict=verdict,
        ),
    )
    values = [
        item,
        CandidateRecord(round=2, slot=1, revision=0, path="/c", task_id="r02-c"),
        RoundMetrics(round=2, training={"reason": "r"}),
        TrainingSummary(solver={"steps": 1}, proposer={"reason": "off"}, run_modes="m"),
    ]
    for value in values:
        restored = serde.loads_typed(serde.dumps_typed(value))
        assert type(restored) is type(value) and restored == value
    restored = serde.loads_typed(serde.dumps_typed(item))
    assert isinstance(restored.brief.task_rates[0], TaskRate)
    assert isinstance(restored.candidate.verdict, Verdict)
    assert restored.brief.band == (0.2, 0.8)


def test_the_training_summary_reports_the_flat_shape_the_round_report_holds():
    """metrics.json and the round report keep their shape: the solver's keys in order, then
    `proposer` and `run_modes`."""
    from autoenvscaling.graphs.flywheel.state import TrainingSummary

    summary = TrainingSummary(
        solver={"steps": 2, "checkpoint": "ck", "reason": "x"},
        proposer={"reason": "off"},
        run_modes="modes",
    )
    assert list(summary.report().items()) == [
        ("steps", 2),
        ("checkpoint", "ck"),
        ("reason", "x"),
        ("proposer", {"reason": "off"}),
        ("run_modes", "modes"),
    ]
    assert summary.headline() == "ck"
    assert TrainingSummary(solver={"error": "e"}).headline() == "e"
