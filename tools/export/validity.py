"""The validity card: the evidence that one exported task is sound, read from what the run stored.

Every number on a card is copied from a stored gate verdict (`candidates/rNN/<name>.verdict.json`,
the admission, and `<name>.precheck.json`, the proposer's own full gate run whose stages the
admission skipped), the pool index, the run manifest and the rollout store. Nothing is re-measured:
a card says what the gate saw when it admitted the task. A seed task that no gate judged in this
run gets a card that says so (`gated = False`), never invented results.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..gate.results import Verdict
from ..run_dir import Manifest, RunDir
from ..tasks.pool import PoolEntry

CARD_FILE = "validity.json"
CARD_VERSION = 1


class StageLine(BaseModel):
    stage: str
    passed: bool
    skipped: bool
    reason: str
    infrastructure_error: bool = False
    checked_at: Literal["proposer", "admission"] = Field(
        description="The proposer's own gate run (its last revision) or the admission gate."
    )
    duration_sec: float = 0.0


class Proposal(BaseModel):
    model: str | None = Field(description="The model that wrote the task.")
    round: int
    attempt_id: str | None = None
    policy_version: str | None = None
    revisions: int | None = None


class Probe(BaseModel):
    """One anti-cheat probe: a tamper probe's reward (must stay below the nop threshold), or
    what the leak scan found (must be nothing)."""

    passed: bool = Field(description="Whether the task withstood this probe.")
    reward: float | None = Field(default=None, description="The probe trial's reward.")
    reason: str = ""
    leaks: int | None = Field(default=None, description="Answers found readable (leak scan only).")
    files_scanned: int | None = None


class Calibration(BaseModel):
    pass_rate: float | None = Field(description="Mean solver reward over the rollouts.")
    rewards: list[float] = Field(default_factory=list)
    band: list[float] = Field(default_factory=list)
    solver: str | None = Field(default=None, description="The solver model the rollouts ran on.")
    policy_version: str | None = Field(default=None, description="Policy version at admission.")


class Decontamination(BaseModel):
    corpus: str | None = Field(description="The held-out set checked against (None: no check).")
    heldout_items: int | None = None
    ngram: int | None = None
    overlap: list[dict[str, Any]] = Field(
        default_factory=list, description="Shared n-grams per held-out item (empty: clean)."
    )


class Neighbour(BaseModel):
    task: str | None = Field(description="The most similar pool task at admission.")
    similarity: float | None = None
    threshold: float | None = None
    pool_size: int | None = None


class ValidityCard(BaseModel):
    card_version: int = CARD_VERSION
    name: str = Field(description="Harbor package name, org/task.")
    task_id: str
    content_hash: str = Field(description="Harbor's task digest (sha256:<hex>), as dataset.toml")
    source: Literal["seed", "proposed"]
    run_id: str
    gated: bool = Field(description="Whether a gate verdict of this run stands behind the task.")
    admitted: bool | None = None
    verdict_reason: str | None = None
    backend: str | None = None
    proposal: Proposal | None = None
    stages: list[StageLine] = Field(default_factory=list)
    oracle_reward: float | None = None
    nop_reward: float | None = None
    determinism_rewards: list[float | None] = Field(
        default_factory=list, description="Every oracle reward (first run and reruns)."
    )
    anti_cheat: dict[str, Probe] = Field(
        default_factory=dict, description="Every anti-cheat probe the gate ran, by name."
    )
    calibration: Calibration | None = None
    decontamination: Decontamination | None = None
    nearest: Neighbour | None = None


def _mapping(value: Any) -> dict[str, Any]:
    """A stored report's sub-object, or empty when it is missing or not an object."""
    return value if isinstance(value, dict) else {}


def verdict_paths(run: RunDir, entry: PoolEntry) -> tuple[Path, Path] | None:
    """(verdict.json, precheck.json) of a proposed pool task; pool ids are `rNN-<candidate>`."""
    if entry.source != "proposed":
        return None
    prefix = f"r{entry.admitted_round:02d}-"
    name = entry.task_id.removeprefix(prefix)
    folder = run.candidates(entry.admitted_round)
    return folder / f"{name}.verdict.json", folder / f"{name}.precheck.json"


def _load(path: Path) -> Verdict | None:
    return Verdict.model_validate_json(path.read_text()) if path.is_file() else None


def merged_stages(admission: Verdict, precheck: Verdict | None) -> list[StageLine]:
    """Every stage once: the admission's own results, and the proposer's for what it skipped."""
    early = {r.stage: r for r in precheck.stages} if precheck else {}
    lines = []
    for result in admission.stages:
        where: Literal["proposer", "admission"] = "admission"
        if result.skipped and result.stage in early:  # skipped at admission: proposer's
            result, where = early[result.stage], "proposer"
        lines.append(
            StageLine(
                stage=result.stage,
                passed=result.passed,
                skipped=result.skipped,
                reason=result.reason,
                infrastructure_error=result.infrastructure_error,
                checked_at=where,
                duration_sec=result.duration_sec,
            )
        )
    return lines


def _details(admission: Verdict, precheck: Verdict | None, stage: str) -> dict[str, Any] | None:
    for verdict in (admission, precheck):
        for result in verdict.stages if verdict else ():
            if result.stage == stage and not result.skipped:
                return result.details
    return None


def build_card(
    *,
    run: RunDir,
    manifest: Manifest,
    entry: PoolEntry,
    name: str,
    content_hash: str,
    proposer_attempt: dict[str, Any] | None,
) -> ValidityCard:
    """The card of one pool task from the run's stored verdicts (see the module docstring)."""
    card = ValidityCard(
        name=name,
        task_id=entry.task_id,
        content_hash=content_hash,
        source=entry.source,
        run_id=manifest.run_id,
        gated=False,
    )
    paths = verdict_paths(run, entry)
    admission = _load(paths[0]) if paths else None
    if admission is None:
        return card
    precheck = _load(paths[1]) if paths else None
    card.gated = True
    card.admitted = admission.admitted
    card.verdict_reason = admission.reason
    card.backend = admission.backend or manifest.config.get("backend")
    card.stages = merged_stages(admission, precheck)

    meta = (proposer_attempt or {}).get("metadata", {})
    card.proposal = Proposal(
        model=meta.get("model") or _proposer_model(manifest),
        round=entry.admitted_round,
        attempt_id=(proposer_attempt or {}).get("id"),
        policy_version=(proposer_attempt or {}).get("policy_version"),
        revisions=meta.get("revisions"),
    )

    oracle = _details(admission, precheck, "oracle") or {}
    card.oracle_reward = oracle.get("reward")
    repeat = _details(admission, precheck, "repeat") or {}
    card.determinism_rewards = list(repeat.get("rewards") or [card.oracle_reward])
    card.nop_reward = (_details(admission, precheck, "nop") or {}).get("reward")
    cheat = _details(admission, precheck, "anti_cheat") or {}
    # The stage keeps one sub-result per probe (tools/gate/anti_cheat/stage.py); the card lists those
    # that ran (a probe switched off says so in the stage's reason, not here).
    probes = _mapping(cheat.get("probes"))
    card.anti_cheat = {
        name: Probe(
            passed=bool(result.get("passed")),
            reward=result.get("reward"),
            reason=str(result.get("reason") or ""),
            leaks=len(found) if isinstance(found := extra.get("leaks"), list) else None,
            files_scanned=extra.get("files_scanned"),
        )
        for name, result in probes.items()
        if isinstance(result, dict) and not result.get("skipped")
        for extra in [_mapping(result.get("details"))]
    }
    calibrate = _details(admission, precheck, "calibrate")
    if calibrate is not None:
        card.calibration = Calibration(
            pass_rate=calibrate.get("mean"),
            rewards=calibrate.get("rewards", []),
            band=calibrate.get("band", []),
            solver=calibrate.get("solver"),
            policy_version=(proposer_attempt or {}).get("policy_version"),
        )
    decontam = _details(admission, precheck, "decontam")
    heldout = manifest.config.get("heldout_dir")
    card.decontamination = Decontamination(
        corpus=Path(heldout).name if heldout and decontam is not None else None,
        heldout_items=(decontam or {}).get("heldout_items"),
        ngram=(decontam or {}).get("n"),
        overlap=(decontam or {}).get("matches", []),
    )
    dedup = _details(admission, precheck, "dedup")
    if dedup is not None:
        closest = dedup.get("closest") or {}
        card.nearest = Neighbour(
            task=Path(closest["key"]).name if closest.get("key") else None,
            similarity=closest.get("similarity"),
            threshold=dedup.get("threshold"),
            pool_size=dedup.get("pool_size"),
        )
    return card


def _proposer_model(manifest: Manifest) -> str | None:
    config = manifest.config
    return config.get("proposer_model") or config.get("policy_model")


def write_card(card: ValidityCard, task_dir: Path) -> Path:
    path = task_dir / CARD_FILE
    path.write_text(json.dumps(card.model_dump(mode="json"), indent=2) + "\n")
    return path


def read_card(task_dir: Path) -> ValidityCard:
    return ValidityCard.model_validate_json((task_dir / CARD_FILE).read_text())
