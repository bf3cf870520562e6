"""Glue between the flywheel's nodes and the roles they run: proposer, gate, trainer, policy server.

Kept apart from graphs/flywheel.py so the graph file shows only the loop; each function here turns
the flywheel's configuration into one call of a role and its result into flywheel records.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoenvscaling.graphs.config import preset
from autoenvscaling.graphs.models import ModelConfig, Policy
from autoenvscaling.tools.report.metrics import CandidateRecord
from autoenvscaling.tools.run_dir import RunDir
from autoenvscaling.tools.tasks.pool import Pool

if TYPE_CHECKING:
    from rich.console import Console

    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel_state import AdmitItem, FlywheelState, SlotTask
    from autoenvscaling.graphs.policy_servers import PolicyServers
    from autoenvscaling.graphs.proposer.settings import ProposalResult
    from autoenvscaling.tools.gate import GateConfig, Verdict
    from autoenvscaling.tools.sandbox.base import Backend


# -- policy serving ------------------------------------------------------------------------------
async def embedded_defaults(
    servers: PolicyServers,
    console: Console | None = None,
    *,
    model_path: Path | None = None,
    base_model: Path | None = None,
) -> dict[str, Any]:
    """Set up (once per machine) and start the embedded policy among the run's `servers`;
    returns flywheel context values (the "embedded" preset and what the server serves).

    `model_path` / `base_model` serve and train another GGUF / HF pair (e.g. a warmed-up model).
    """
    from autoenvscaling.training.serving.embedded_setup import ensure_embedded_assets

    if console:
        console.print("embedded policy: setting up (first time only) and starting the server...")
    assets = await asyncio.to_thread(ensure_embedded_assets)
    if console:
        console.print(f"  {assets.summary()}")
    ref = await servers.start_embedded(model_path or assets.model_path)
    values: dict[str, Any] = {
        "policy_model": f"openai:{ref.model}",
        "policy_base_url": ref.base_url,
        **preset("embedded"),
    }
    if servers.embedded is not None:  # the window the server was started with: one source
        values["context_window"] = servers.embedded.config.n_ctx
    if base_model is not None:
        values["base_model"] = str(base_model)
    else:
        from autoenvscaling.training.serving.embedded_setup import ensure_hf_base_model

        try:
            values["base_model"] = str(await asyncio.to_thread(ensure_hf_base_model, assets))
        except Exception as exc:  # noqa: BLE001 - no torch here: the run trains nothing, and says why
            if console:
                console.print(
                    f"  [yellow]no trainable weights ({exc}); training will be skipped[/]"
                )
    if console:
        console.print(f"  serving {ref.model} at {ref.base_url}")
    return values


async def rebind_policy(ctx: FlywheelContext, run: RunDir, policy: Policy | None) -> str | None:
    """On resume: make the live policy server (a new process on a new port) serve the checkpoint
    the graph state names, under the same model name. Returns that name, or None when the state
    names the base model (nothing to load). Raises PolicySwapError when it cannot be served:
    resuming against a server that lacks the policy would score the wrong model."""
    if policy is None or not policy.checkpoint_id:
        return None
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.policy import PolicySwapError

    server = ctx.servers.for_config(ctx)
    if server is None:
        raise PolicySwapError(
            f"the run's policy is checkpoint {policy.checkpoint_id}, but no policy server "
            f"(policy_server={ctx.policy_server}) can load it on resume; resume with the server "
            "the run started with"
        )
    checkpoint = CheckpointRegistry(run.checkpoints).get(policy.checkpoint_id)
    ref = await server.activate(checkpoint)
    if f"openai:{ref.model}" != policy.model:
        raise PolicySwapError(
            f"the server serves checkpoint {checkpoint.id} as {ref.model!r}, but the run's state "
            f"names {policy.model!r}"
        )
    return ref.model


# -- training ------------------------------------------------------------------------------------
async def run_training(
    ctx: FlywheelContext, run: RunDir, state: FlywheelState
) -> tuple[dict[str, Any], Policy | None]:
    """Train on the round's admitted + replay tasks; returns (summary, new policy or None)."""
    if not ctx.train:
        return {"reason": "training skipped (train=false); the policy is unchanged"}, None
    round_ = state["round"]
    pool = Pool(run.pool)
    admitted = [c.task_id for c in state.get("candidates", []) if c.round == round_ and c.admitted]
    active = [e.task_id for e in pool.entries("active")]
    replay = [t for t in active if t not in admitted]
    if not admitted and not replay:
        return {
            "reason": "no admitted or in-band pool tasks to train on; the policy is unchanged"
        }, None
    if not ctx.base_model:
        return {
            "reason": "no base_model (HF weights of the policy) configured: training needs "
            "the policy's weights; the policy is unchanged"
        }, None
    from autoenvscaling.training.backend import TrainHyperParams, TrainingError, TrainJob
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.grpo.trl_backend import TRLGRPOBackend

    registry = CheckpointRegistry(run.checkpoints)
    policy = state["policy"]
    job = TrainJob(
        job_id=f"{state['run_id']}-r{round_:02d}",
        base_model=ctx.base_model,
        parent=registry.get(policy.checkpoint_id) if policy.checkpoint_id else None,
        task_dirs=[pool.path(t) for t in admitted],
        replay_task_dirs=[pool.path(t) for t in replay],
        hyper=TrainHyperParams(
            steps=ctx.train_steps,
            num_generations=ctx.num_generations,
            tasks_per_step=min(ctx.train_tasks_per_step, max(1, len(admitted) + len(replay))),
        ),
        work_dir=run.root / "train" / f"r{round_:02d}",
        sandbox_backend=ctx.backend,
    )
    try:
        # CURRENT moves only once the new checkpoint is served (below), never before.
        result = await TRLGRPOBackend(registry, make_current=False).train(job)
    except TrainingError as exc:
        return {
            "error": str(exc)[-1500:],
            "reason": "training failed; the policy is unchanged",
        }, None
    summary: dict[str, Any] = {
        "steps": result.steps_done,
        "groups": result.groups_total,
        "groups_without_reward_variance": result.groups_dropped_no_variance,
        "seconds": round(result.duration_sec, 1),
        **{k: v for k, v in result.metrics.items() if isinstance(v, int | float | str)},
        # Task ids, not paths: what each optimizer step trained on (admitted first).
        "step_tasks": [
            [Path(t).name for t in step] for step in result.metrics.get("step_tasks") or []
        ],
        "admitted_trained": sorted(
            {Path(t).name for step in result.metrics.get("step_tasks") or [] for t in step}
            & set(admitted)
        ),
    }
    if result.checkpoint is None:
        summary["reason"] = result.reason or "no checkpoint published; the policy is unchanged"
        return summary, None
    checkpoint = result.checkpoint
    summary["checkpoint"] = checkpoint.id
    run.add_lineage(
        {
            "round": round_,
            "checkpoint": checkpoint.id,
            "parent": checkpoint.parent_id,
            "base_model": checkpoint.base_model,
            "kind": checkpoint.kind,
        }
    )
    server = ctx.servers.for_config(ctx)
    if server is None:
        summary["reason"] = (
            "checkpoint published but no policy server swaps it in "
            "(policy_server=none); both roles keep the served model"
        )
        return summary, None
    from autoenvscaling.training.policy import PolicySwapError

    try:
        ref = await server.activate(checkpoint)
    except PolicySwapError as exc:
        summary["reason"] = f"swap failed, the previous policy stays: {exc}"
        return summary, None
    registry.set_current(checkpoint.id)
    summary["served_as"] = ref.model
    new = Policy(
        model=f"openai:{ref.model}",
        base_url=ref.base_url,
        checkpoint_id=checkpoint.id,
        version=checkpoint.id,
        tool_choice=policy.tool_choice,
    )
    return summary, new


# -- proposer and gate ---------------------------------------------------------------------------
# The proposer repairs against every stage but calibrate (it cannot calibrate against itself);
# admission re-checks what can change between candidates (calibrate with the current solver, dedup
# against a pool other slots may just have grown) on the submitted, now frozen folder.
PROPOSER_CHECKED = ("lint", "build", "oracle", "nop", "repeat", "anti_cheat", "decontam")


def _gate(ctx: FlywheelContext, run: RunDir, solver: ModelConfig | None) -> GateConfig:
    from autoenvscaling.graphs.proposer import gate_config

    return gate_config(
        backend=ctx.backend,
        pool_dir=run.pool,
        solver=solver if ctx.calibrate else None,
        solver_max_turns=ctx.solver_max_turns,
        band=(ctx.band_low, ctx.band_high),
        calibration_rollouts=ctx.calibration_rollouts,
        trials_dir=run.trials,
        heldout_dirs=[Path(d) for d in ctx.decontam_dirs],
    )


async def run_proposer(
    ctx: FlywheelContext, run: RunDir, task: SlotTask, model: ModelConfig, graph: Any = None
) -> ProposalResult:
    """One proposer attempt (episodes + revisions against the gate minus calibrate), run by
    the compiled attempt `graph` (default: graphs/proposer's)."""
    from autoenvscaling.graphs.agent_loop import LoopBudget
    from autoenvscaling.graphs.proposer import ProposerSettings, propose

    policy = task.policy
    settings = ProposerSettings(
        model=model,
        arm=ctx.arm,  # pyright: ignore[reportArgumentType] - a str option; pydantic checks it
        solver_feedback=ctx.solver_feedback,
        budget=LoopBudget(max_turns=ctx.proposer_max_turns, time_budget_sec=900),
        max_revisions=ctx.max_revisions,
        gate=_gate(ctx, run, None),
        store_path=str(run.rollouts),
        run_id=task.run_id,
        round=task.round,
        policy_version=policy.version,
    )
    # Slots in one group share a brief (and its focus): the proposer's GRPO group.
    size = max(1, ctx.proposer_group_size)
    brief = task.brief.for_slot(task.slot // size, -(-ctx.proposals // size))
    return await propose(
        brief, settings, out_dir=run.candidates(task.round), index=task.slot, graph=graph
    )


async def run_gate(
    ctx: FlywheelContext,
    run: RunDir,
    item: AdmitItem,
    solver_model: ModelConfig,
    validation: Any = None,
) -> CandidateRecord:
    """Admission of one proposal: the compiled `validation` graph (default: graphs/validation's)
    on the final candidate."""
    from autoenvscaling.tools.gate import REWARD_VALIDATION_FAILED
    from autoenvscaling.tools.rollouts.store import RolloutStore

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
                "stage_seconds": verdict.timings,
                "content_hash": verdict.content_hash,
                "snapshot": str(frozen) if frozen else None,
                "not_configured": list(verdict.not_configured),
            }
        )
        # The proposer's rollout earns the admission's reward, not the pre-check's.
        proposal_attempt = record.attempt_id
        assert proposal_attempt is not None  # every proposal is a recorded attempt
        with RolloutStore(run.rollouts) as store:
            store.finish_attempt(
                proposal_attempt,
                reward=verdict.proposer_reward,
                outcome="error"
                if verdict.infrastructure_error
                else ("solved" if verdict.admitted else "failed"),
                metadata={"admission": verdict.summary()},
            )
    if not record.admitted and ctx.backend in ("podman", "docker"):
        await _drop_candidate_image(candidate, ctx.backend)
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
        "store_path": str(run.rollouts),
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
    from autoenvscaling.tools.rollouts.store import RolloutStore

    if not run.rollouts.exists():
        return
    with RolloutStore(run.rollouts) as store:
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
    """Give each recorded calibration rollout its reward (None for infrastructure failures)."""
    from autoenvscaling.tools.rollouts.models import AttemptNotFoundError
    from autoenvscaling.tools.rollouts.store import RolloutStore

    stage = next((r for r in verdict.stages if r.stage == "calibrate"), None)
    attempts = (
        [a for a in (stage.details.get("attempts") or []) if a.get("attempt_id")] if stage else []
    )
    if not attempts:
        return
    with RolloutStore(run.rollouts) as store:
        for a in attempts:
            try:
                store.get_attempt(a["attempt_id"])
            except AttemptNotFoundError:
                continue  # the agent died before recording: nothing to finish
            reward = a.get("reward")
            outcome = (
                "error"
                if a.get("infrastructure")
                else ("solved" if (reward or 0.0) >= 1.0 else "failed")
            )
            store.finish_attempt(
                a["attempt_id"],
                reward=reward,
                outcome=outcome,
                error=a.get("error"),
                metadata={"purpose": "calibration", "candidate": task_id},
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
    from autoenvscaling.graphs.nesting import non_durable
    from autoenvscaling.graphs.validation import ValidationInput
    from autoenvscaling.graphs.validation import graph as validation_graph
    from autoenvscaling.tools.gate import REWARD_VALIDATION_FAILED, Verdict, make_verdict
    from autoenvscaling.tools.gate.results import infrastructure_verdict
    from autoenvscaling.tools.tasks.snapshot import SnapshotError, content_hash, freeze

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
    return verdict.model_copy(update={"content_hash": digest}), frozen


async def _drop_candidate_image(candidate: Path, backend: Backend) -> None:
    """A rejected candidate's image is garbage; admitted ones are kept (best effort)."""
    from autoenvscaling.tools.sandbox.images import remove_task_image

    try:
        await asyncio.to_thread(remove_task_image, candidate, backend=backend)
    except Exception:  # noqa: BLE001 - cleanup must never fail an admission
        pass


__all__ = [
    "embedded_defaults",
    "rebind_policy",
    "run_gate",
    "run_proposer",
    "run_training",
]
