"""Both roles learn: the proposer's update in the training node, the cold start, the run modes.

`train_proposer` runs after the solver's GRPO step in the flywheel's training node: it groups the
round's proposer attempts (training/proposer/update.py), trains with TRL GRPO on the gate's
proposer reward every `proposer_update_every` rounds, publishes the checkpoint (a child of the
solver's) and swaps it in for both roles. `adopt_checkpoint` is the swap both the training node
and the cold start use: after it, the proposer's and the solver's model configs name the new
checkpoint. `run_modes` is the line the manifest and the round report show.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from autoenvscaling.graphs.models import Policy

if TYPE_CHECKING:
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel_state import FlywheelState
    from autoenvscaling.tools.run_dir import RunDir
    from autoenvscaling.training.policy import Checkpoint, PolicyServer


def run_modes(ctx: FlywheelContext) -> str:
    """The comparison arms this run belongs to, in one line (manifest and report)."""
    proposer = (
        f"on (every {ctx.proposer_update_every} round(s), groups of {ctx.proposer_group_size})"
        if ctx.train and ctx.proposer_training
        else "off"
    )
    cold = f"on ({ctx.policy_checkpoint_id})" if ctx.cold_start else "off"
    return f"proposer training {proposer}; cold start {cold}"


async def adopt_checkpoint(checkpoint: Checkpoint, server: PolicyServer, current: Policy) -> Policy:
    """Serve `checkpoint` and return the policy both roles use from now on."""
    ref = await server.activate(checkpoint)
    return Policy(
        model=f"openai:{ref.model}",
        base_url=ref.base_url,
        checkpoint_id=checkpoint.id,
        version=checkpoint.id,
        tool_choice=current.tool_choice,
    )


async def train_proposer(
    ctx: FlywheelContext, run: RunDir, state: FlywheelState, policy: Policy
) -> tuple[dict[str, Any], Policy | None]:
    """The proposer's GRPO update on this round's attempts; (summary, new policy or None)."""
    from autoenvscaling.training.proposer.update import plan_proposer_update, update_due

    round_ = state["round"]
    if not (ctx.train and ctx.proposer_training):
        return {"reason": "proposer training is off for this run"}, None
    if not update_due(round_, ctx.proposer_update_every):
        return {
            "reason": f"the proposer updates every {ctx.proposer_update_every} rounds; "
            f"not in round {round_}"
        }, None
    if not ctx.base_model:
        return {"reason": "no base_model (HF weights) configured: nothing to train"}, None
    since = round_ - max(1, ctx.proposer_update_every) + 1
    plan = plan_proposer_update(
        run.rollouts, rounds=list(range(since, round_ + 1)), run_id=state.get("run_id")
    )
    summary: dict[str, Any] = plan.summary()
    if plan.reason:
        summary["reason"] = plan.reason
        return summary, None
    work = run.root / "train" / f"r{round_:02d}-proposer"
    work.mkdir(parents=True, exist_ok=True)
    (work / "plan.json").write_text(plan.model_dump_json(indent=2))

    from autoenvscaling.training.backend import TrainHyperParams, TrainingError
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.policy import PolicySwapError
    from autoenvscaling.training.proposer.update import ProposerJob, TRLProposerBackend

    registry = CheckpointRegistry(run.checkpoints)
    current = policy
    job = ProposerJob(
        job_id=f"{state['run_id']}-r{round_:02d}-proposer",
        base_model=ctx.base_model,
        parent=registry.get(current.checkpoint_id) if current.checkpoint_id else None,
        groups=plan.groups,
        group_size=plan.group_size,
        hyper=TrainHyperParams(steps=ctx.proposer_train_steps),
        work_dir=work,
    )
    try:
        result = await TRLProposerBackend(registry).train(job)
    except TrainingError as exc:
        summary.update(error=str(exc)[-1500:], reason="proposer training failed; policy unchanged")
        return summary, None
    summary.update(
        steps=result.steps_done,
        seconds=round(result.duration_sec, 1),
        param_change_l2=result.metrics.get("param_change_l2"),
    )
    if result.checkpoint is None:
        summary["reason"] = result.reason or "no checkpoint published; the policy is unchanged"
        return summary, None
    summary["checkpoint"] = result.checkpoint.id
    run.add_lineage(
        {
            "round": round_,
            "role": "proposer",
            "checkpoint": result.checkpoint.id,
            "parent": result.checkpoint.parent_id,
            "base_model": result.checkpoint.base_model,
            "kind": result.checkpoint.kind,
        }
    )
    server = ctx.servers.for_config(ctx)
    if server is None:
        summary["reason"] = (
            "checkpoint published; no policy server swaps it in (policy_server=none)"
        )
        return summary, None
    try:
        new = await adopt_checkpoint(result.checkpoint, server, current)
    except PolicySwapError as exc:
        summary["reason"] = f"swap failed, the previous policy stays: {exc}"
        return summary, None
    summary["served_as"] = new.model
    return summary, new


# -- cold start -----------------------------------------------------------------------------------


async def cold_start_checkpoint(
    cache: Path,
    *,
    base_model: str,
    seed_dir: Path,
    backend: str | None = None,
    steps: int = 60,
    progress: Any = None,
) -> Checkpoint:
    """The cold-start checkpoint in `cache` (a registry), built once: the seed pool's reference
    solutions replayed through the served solver (kept at reward 1.0), then SFT on them."""
    from autoenvscaling.graphs.sft_replay import replay_tasks
    from autoenvscaling.training.backend import TrainHyperParams, TrainingError
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.sft.data import deduplicate, to_hf_dataset, write_jsonl
    from autoenvscaling.training.sft.trl_backend import SFTJob, TRLSFTBackend

    registry = CheckpointRegistry(cache / "registry")
    current = registry.current()
    if current is not None and current.base_model == base_model:
        return current
    say = progress or (lambda _msg: None)
    tasks = sorted(p for p in Path(seed_dir).iterdir() if (p / "task.toml").is_file())
    say(f"cold start: replaying {len(tasks)} reference solutions (once per machine)")
    _results, examples = await replay_tasks(
        tasks, store_path=cache / "rollouts.db", backend=backend, trials_dir=cache / "trials"
    )
    examples, _dropped = deduplicate(examples)
    if not examples:
        raise TrainingError("cold start: no reference solution replayed with reward 1.0")
    write_jsonl(examples, cache / "sft.jsonl")
    to_hf_dataset(examples).save_to_disk(str(cache / "dataset"))
    say(f"cold start: SFT on {len(examples)} verified trajectories ({steps} steps)")
    job = SFTJob(
        job_id=f"cold-start-{len(examples)}",
        base_model=base_model,
        dataset=cache / "dataset",
        work_dir=cache / "job",
        hyper=TrainHyperParams(steps=steps, learning_rate=2e-4),
    )
    result = await TRLSFTBackend(registry).train(job)
    if result.checkpoint is None:
        raise TrainingError(f"cold start published nothing: {result.reason}")
    return result.checkpoint


async def adopt_cold_start(
    checkpoint: Checkpoint, run_checkpoints: Path, server: PolicyServer, current: Policy
) -> Policy:
    """Put the cold-start checkpoint in the run's registry (same id) and serve it to both roles."""
    from autoenvscaling.training.checkpoints import CheckpointRegistry

    registry = CheckpointRegistry(run_checkpoints)
    if not registry.exists(checkpoint.id):
        registry.publish(
            checkpoint.path,
            base_model=checkpoint.base_model,
            kind=checkpoint.kind,
            job_id=checkpoint.job_id,
            metrics={**checkpoint.metrics, "cold_start": True},
            checkpoint_id=checkpoint.id,
        )
    return await adopt_checkpoint(registry.get(checkpoint.id), server, current)
