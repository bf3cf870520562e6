"""Admission: a proposer attempt as the flywheel runs it, and the gate that admits its task.

The proposer repairs against the gate in its own workspace; admission re-checks the submitted
folder's frozen snapshot (bytes hashed at submit), calibrates it with the current solver, and
puts exactly those bytes in the pool. Each function turns the flywheel's configuration into one
call of a role and its result into flywheel records (graphs/flywheel/nodes.py calls them).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...tools.gate import REWARD_VALIDATION_FAILED, Verdict, make_verdict
from ...tools.gate.gpu import scored_for_proposer
from ...tools.gate.results import infrastructure_verdict
from ...tools.report.metrics import CandidateRecord
from ...tools.rollouts.models import AttemptNotFoundError
from ...tools.rollouts.store import RolloutStore
from ...tools.run_dir import RunDir
from ...tools.sandbox.harbor_backends import our_engine
from ...tools.sandbox.images import remove_task_image
from ...tools.tasks.domains import DEFAULT_DOMAIN, folder_domain
from ...tools.tasks.snapshot import SnapshotError, content_hash, freeze
from ..agent.nesting import non_durable
from ..models import ModelConfig
from ..proposer.record import propose
from ..proposer.settings import ProposerSettings, gate_config, proposer_budget
from ..validation.builder import ValidationInput
from ..validation.builder import graph as validation_graph

if TYPE_CHECKING:
    from ...tools.agents.brief import ProposerBrief
    from ...tools.gate import GateConfig, Verdict
    from ...tools.sandbox.base import Backend
    from ..config import FlywheelContext
    from ..proposer.settings import ProposalResult
    from .state import AdmitItem, SlotTask


# -- proposer and gate ---------------------------------------------------------------------------
# The proposer repairs against every stage but calibrate (it cannot calibrate against itself);
# admission re-checks what can change between candidates (calibrate with the current solver, dedup
# against a pool other slots may just have grown) on the submitted, now frozen folder.
PROPOSER_CHECKED = ("lint", "build", "oracle", "nop", "repeat", "anti_cheat", "decontam")


def _gate(ctx: FlywheelContext, run: RunDir, solver: ModelConfig | None) -> GateConfig:

    return gate_config(
        backend=ctx.backend,
        pool_dir=run.pool,
        solver=solver if ctx.calibrate else None,
        solver_max_turns=ctx.solver_max_turns,
        tool_output_chars=ctx.tool_output_chars,
        band=(ctx.band_low, ctx.band_high),
        calibration_rollouts=ctx.calibration_rollouts,
        trials_dir=run.trials,
        heldout_dirs=[Path(d) for d in ctx.decontam_sources()],
    )


def proposer_gate(ctx: FlywheelContext, run: RunDir) -> GateConfig:
    """The gate a proposer repairs against and its submission meets: all but calibrate."""
    return _gate(ctx, run, None)


async def run_proposer(
    ctx: FlywheelContext, run: RunDir, task: SlotTask, model: ModelConfig, graph: Any = None
) -> ProposalResult:
    """One proposer attempt (episodes + revisions against the gate minus calibrate), run by
    the compiled attempt `graph` (default: graphs/proposer's)."""

    policy = task.policy
    settings = ProposerSettings(
        model=model,
        arm=ctx.arm,  # pyright: ignore[reportArgumentType] - a str option; pydantic checks it
        solver_feedback=ctx.solver_feedback,
        budget=proposer_budget(ctx.proposer_max_turns),
        max_revisions=ctx.max_revisions,
        compact_prompt=ctx.proposer_compact_prompt,
        gate=proposer_gate(ctx, run),
        store_path=run.store,
        run_id=task.run_id,
        round=task.round,
        policy_version=policy.version,
    )
    return await propose(
        slot_brief(ctx, task),
        settings,
        out_dir=run.candidates(task.round),
        index=task.slot,
        graph=graph,
    )


def slot_brief(ctx: FlywheelContext, task: SlotTask) -> ProposerBrief:
    """The brief proposer slot `task.slot` works from; slots in one group share a brief (and its
    focus): the proposer's GRPO group."""
    size = max(1, ctx.proposer_group_size)
    return task.brief.for_slot(task.slot // size, -(-ctx.proposals // size))


async def run_gate(
    ctx: FlywheelContext,
    run: RunDir,
    item: AdmitItem,
    solver_model: ModelConfig,
    validation: Any = None,
) -> CandidateRecord:
    """Admission of one proposal: the compiled `validation` graph (default: graphs/validation's)
    on the final candidate."""

    proposal = item.candidate
    candidate = Path(proposal.candidate)
    record = CandidateRecord(
        round=item.round,
        slot=item.slot,
        revision=proposal.revisions,
        path=str(candidate),
        task_id=f"r{item.round:02d}-{candidate.name}",
        attempt_id=proposal.attempt_id,
        arm=proposal.arm,
        # What it wrote, else what it was aimed at (a proposal that never wrote a task.toml).
        domain=folder_domain(candidate) or slot_brief(ctx, item).domain or DEFAULT_DOMAIN,
        prompt_tokens=proposal.prompt_tokens,
        completion_tokens=proposal.completion_tokens,
    )
    last = proposal.verdict
    if last is None or not last.admitted:
        # Rejected while proposing (or never submitted): that verdict stands.
        verdict = last
        reason = (
            last.reason
            if last
            else proposal.error or f"no candidate submitted ({proposal.stop_reason})"
        )
        # A failed model call or a crashed gate says nothing about the proposer: reward None.
        infra = bool(last and last.infrastructure_error) or (
            proposal.outcome == "error" and last is None
        )
        reward = proposal.reward
        record = record.model_copy(
            update={
                # No verdict: the proposer never submitted (or its model failed): say which.
                "stage": last.stage
                if last
                else ("error" if proposal.outcome == "error" else "not_submitted"),
                "reason": reason,
                "proposer_reward": None
                if infra
                else (reward if reward is not None else REWARD_VALIDATION_FAILED),
                "infrastructure_error": infra,
            }
        )
    else:
        verdict, frozen = await _check_snapshot(
            ctx,
            run,
            item,
            record.task_id,
            candidate,
            last,
            solver_model,
            validation,
        )
        record = record.model_copy(
            update={
                "admitted": verdict.admitted,
                "stage": verdict.stage or (None if verdict.admitted else "changed_after_submit"),
                "reason": verdict.reason,
                "proposer_reward": verdict.proposer_reward,
                "infrastructure_error": verdict.infrastructure_error,
                "kind": verdict.kind,
                "missing": [str(m) for m in verdict.missing],
                "stage_seconds": verdict.timings,
                "content_hash": verdict.content_hash,
                "snapshot": str(frozen) if frozen else None,
                "not_configured": list(verdict.not_configured),
            }
        )
        # The proposer's rollout earns the admission's reward, not the pre-check's.
        proposal_attempt = record.attempt_id
        assert proposal_attempt is not None  # every proposal is a recorded attempt
        with RolloutStore(run.store) as store:
            store.finish_attempt(
                proposal_attempt,
                reward=verdict.proposer_reward,
                outcome="error"
                if verdict.infrastructure_error
                else ("solved" if verdict.admitted else "failed"),
                # The stage, apart: the graded proposer reward reads it (training/proposer/update.py).
                metadata={"admission": verdict.summary(), "admission_stage": verdict.stage},
            )
    if not record.admitted and (engine := our_engine(ctx.backend)):
        await _drop_candidate_image(candidate, engine)
    if verdict is not None:
        (candidate.parent / f"{candidate.name}.verdict.json").write_text(
            verdict.model_dump_json(indent=2)
        )
    if last is not None and last is not verdict:
        # The stages the proposer's own gate run checked (skipped at admission): the export's
        # validity card reads both files.
        (candidate.parent / f"{candidate.name}.precheck.json").write_text(
            last.model_dump_json(indent=2)
        )
    return record


def _recorded(gate: GateConfig, run: RunDir, item: AdmitItem, task_id: str) -> GateConfig:
    """The gate with its calibration solver recording every rollout, linked to the candidate."""
    settings = gate.solver_kwargs.get("settings")
    if not settings:
        return gate
    policy = item.policy
    settings = {
        **settings,
        "store_path": run.store,
        "run_id": item.run_id,
        "round": item.round,
        "policy_version": policy.version,
        "task_id": task_id,
        "tags": {"purpose": "calibration", "candidate": task_id},
    }
    return gate.model_copy(update={"solver_kwargs": {**gate.solver_kwargs, "settings": settings}})


def _drop_unjudged_calibration(run: RunDir, run_id: str, round_: int, task_id: str) -> None:
    """Remove calibration rollouts a killed run recorded for this candidate in this round.

    A candidate is admitted once per round, so any such rollout is from an admission that was
    killed before its verdict was checkpointed; the resume calibrates again from the start, and
    keeping the old rollouts too would count them twice (their ids are fresh per trial).
    """

    if not run.has_store:
        return
    with RolloutStore(run.store) as store:
        stale = [
            a.id
            for a in store.list_attempts(
                role="solver", task_id=task_id, run_id=run_id, limit=100_000
            )
            if a.round == round_ and a.metadata.get("purpose") == "calibration"
        ]
        if stale:
            store.delete_attempts(stale)


def _finish_calibration(run: RunDir, verdict: Verdict, task_id: str) -> None:
    """Give each recorded calibration rollout its reward: None, outcome `error`, when the
    rollout was not scored (an infrastructure failure or the task's fault, tools/trials/faults.py)."""

    stage = next((r for r in verdict.stages if r.stage == "calibrate"), None)
    attempts = (
        [a for a in (stage.details.get("attempts") or []) if a.get("attempt_id")] if stage else []
    )
    if not attempts:
        return
    with RolloutStore(run.store) as store:
        for a in attempts:
            try:
                store.get_attempt(a["attempt_id"])
            except AttemptNotFoundError:
                continue  # the agent died before recording: nothing to finish
            fault = a.get("fault") or ("infrastructure" if a.get("infrastructure") else None)
            reward = None if fault else a.get("reward")
            outcome = "error" if fault else ("solved" if (reward or 0.0) >= 1.0 else "failed")
            store.finish_attempt(
                a["attempt_id"],
                reward=reward,
                outcome=outcome,
                error=a.get("error"),
                metadata={"purpose": "calibration", "candidate": task_id, "fault": fault},
            )


async def _check_snapshot(
    ctx: FlywheelContext,
    run: RunDir,
    item: AdmitItem,
    task_id: str,
    candidate: Path,
    submitted: Verdict,
    solver_model: ModelConfig,
    validation: Any = None,
) -> tuple[Verdict, Path | None]:
    """Freeze the submitted candidate, prove it holds the bytes the proposer's final check saw,
    and run the admission stages (calibrate, dedup) on the frozen copy.

    Returns (verdict, frozen folder or None). The verdict merges the final check's stages with
    the admission's, so it lists every stage's result for exactly these bytes."""

    frozen = run.root / "snapshots" / f"r{item.round:02d}" / candidate.name
    try:
        digest = await asyncio.to_thread(freeze, candidate, frozen)
    except SnapshotError as exc:
        return infrastructure_verdict(candidate, exc, backend=ctx.backend), None
    if submitted.content_hash != digest:
        return submitted.model_copy(
            update={
                "admitted": False,
                "proposer_reward": REWARD_VALIDATION_FAILED,
                "content_hash": digest,
                "reason": "the candidate was edited after it was submitted: the gate checked "
                f"{submitted.content_hash}, the folder now holds {digest}; only checked bytes "
                "are admitted",
            }
        ), None
    gate = _recorded(_gate(ctx, run, solver_model), run, item, task_id).with_skip(*PROPOSER_CHECKED)
    await asyncio.to_thread(_drop_unjudged_calibration, run, item.run_id, item.round, task_id)
    # Not checkpointed inside the flywheel's node: a killed admission starts again from its
    # first stage (with the stale calibration rollouts dropped above), never from a half.
    # durability="exit": no checkpointer, and langgraph 1.2.24 fails a checkpointer-less graph
    # that inherits the CLI's durability="sync" (AttributeError: _put_checkpoint_fut).
    state = await non_durable(validation or validation_graph).ainvoke(
        ValidationInput(task=str(frozen)), context=gate, durability="exit"
    )
    admission = Verdict.model_validate(state["verdict"])
    await asyncio.to_thread(_finish_calibration, run, admission, task_id)
    kept = [r for r in submitted.stages if r.stage in PROPOSER_CHECKED]
    fresh = [r for r in admission.stages if r.stage not in PROPOSER_CHECKED]
    verdict = make_verdict(frozen, kept + fresh, backend=ctx.backend)
    if await asyncio.to_thread(content_hash, frozen) != digest:
        return infrastructure_verdict(
            frozen, SnapshotError("the frozen copy changed during admission"), backend=ctx.backend
        ), None
    return scored_for_proposer(verdict.model_copy(update={"content_hash": digest})), frozen


async def _drop_candidate_image(candidate: Path, backend: Backend) -> None:
    """A rejected candidate's image is garbage; admitted ones are kept (best effort)."""

    try:
        await asyncio.to_thread(remove_task_image, candidate, backend=backend)
    except Exception:  # noqa: BLE001 - cleanup must never fail an admission
        pass


__all__ = ["run_gate", "run_proposer"]
