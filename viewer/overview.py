"""The run's overview: its rounds so far and the one in progress, its manifest in groups, the
policy lineage, and every warning the round reports raised.

What runs now comes from three places a live run keeps current: the checkpointer's newest
super-step (the node, graph_progress.py), the rollout store's attempts with no outcome yet (who
is attempting what, since when), and candidate folders with no verdict yet.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field

from ..tools.report.metrics import RoundMetrics
from ..tools.rollouts.models import Attempt
from ..tools.run_dir import Manifest
from .candidates import CandidateSummary, list_candidates
from .graph_progress import GraphProgress, read_progress
from .run_folder import RunFolder

#: The manifest's settings in the groups a person looks for; the rest follow as "other".
GROUPS: dict[str, tuple[str, ...]] = {
    "models": (
        "policy_model",
        "policy_server",
        "base_model",
        "proposer_model",
        "solver_model",
        "policy_checkpoint_id",
        "price_per_mtok",
    ),
    "modes": (
        "decontamination",
        "proposer_training",
        "proposer_update_every",
        "proposer_group_size",
        "train",
        "calibrate",
        "cold_start",
        "arm",
        "solver_feedback",
        "human_review",
        "heldout_dir",
        "heldout_samples",
        "splits_check",
        "cold_start_tasks",
        "seed_dir",
        "backend",
    ),
    "budgets": (
        "rounds",
        "proposals",
        "max_revisions",
        "proposer_max_turns",
        "solver_max_turns",
        "max_tokens",
        "context_window",
        "temperature",
        "tool_output_chars",
        "calibration_rollouts",
        "refresh_attempts",
        "refresh_limit",
        "band_low",
        "band_high",
        "train_steps",
        "num_generations",
        "concurrency",
    ),
}
#: Machine-specific or unwieldy settings the overview leaves to the raw manifest file.
HIDDEN = {
    "run_dir",
    "policy_base_url",
    "proposer_base_url",
    "solver_base_url",
    "episodes",
    "splits",  # shown as `splits_check`; the task lists stay in the manifest file
}


class Setting(BaseModel):
    key: str
    value: str


class RunningAttempt(BaseModel):
    attempt: Attempt
    elapsed_sec: float


class LiveStatus(BaseModel):
    """What the run is doing now; `progress` None when it has no checkpoint yet."""

    progress: GraphProgress | None
    round: int | None = Field(description="The round in progress, or None when the run ended.")
    step_elapsed_sec: float | None = None
    round_elapsed_sec: float | None = None
    running: list[RunningAttempt] = Field(default_factory=list)
    judging: list[CandidateSummary] = Field(default_factory=list)
    history: list[RoundMetrics] = Field(default_factory=list, description="Finished rounds.")


class Overview(BaseModel):
    manifest: Manifest | None
    settings: dict[str, list[Setting]]
    warnings: list[tuple[int, str]]
    live: LiveStatus


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def grouped_settings(config: dict[str, Any]) -> dict[str, list[Setting]]:
    groups = {
        name: [Setting(key=k, value=_value(config[k])) for k in keys if k in config]
        for name, keys in GROUPS.items()
    }
    known = {k for keys in GROUPS.values() for k in keys} | HIDDEN
    groups["other"] = [
        Setting(key=k, value=_value(v)) for k, v in sorted(config.items()) if k not in known
    ]
    return {k: v for k, v in groups.items() if v}


def live_status(run: RunFolder, history: list[RoundMetrics] | None = None) -> LiveStatus:
    history = run.history() if history is None else history
    now = datetime.now(UTC)
    progress = read_progress(run.layout.graph_db)
    store = run.store()
    running = []
    if store is not None:
        running = [
            RunningAttempt(attempt=a, elapsed_sec=(now - a.started_at).total_seconds())
            for a in store.list_attempts(outcome="running", limit=100)
        ]
    ended = progress is not None and progress.finished
    current = None if ended else (progress.round if progress else None)
    rounds = run.candidate_rounds()
    judging_round = current if current is not None else (rounds[-1] if rounds else None)
    judging = (
        [c for c in list_candidates(run, judging_round) if not c.judged]
        if judging_round is not None and not ended
        else []
    )
    return LiveStatus(
        progress=progress,
        round=current,
        step_elapsed_sec=(now - progress.checkpoint_at).total_seconds()
        if progress and not ended
        else None,
        round_elapsed_sec=(now - progress.round_started).total_seconds()
        if progress and progress.round_started and not ended
        else None,
        running=running,
        judging=judging,
        history=history,
    )


def overview(run: RunFolder) -> Overview:
    manifest = run.manifest()
    history = run.history()
    return Overview(
        manifest=manifest,
        settings=grouped_settings(manifest.config) if manifest else {},
        warnings=[(m.round, w) for m in history for w in m.warnings],
        live=live_status(run, history),
    )
