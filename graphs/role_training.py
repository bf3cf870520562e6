"""Both roles learn: the proposer's update in the training node and the run modes (the cold
start, which uses `adopt_checkpoint` too, is graphs/cold_start.py).

`train_proposer` runs first in the flywheel's training node, from the checkpoint that sampled the
round's proposer episodes (the state's policy), so its GRPO update is on-policy: it groups the
round's proposer attempts that this policy wrote (training/proposer/update.py), trains with TRL
GRPO on the gate's proposer reward every `proposer_update_every` rounds and publishes the
checkpoint. The solver's GRPO step, whose episodes are generated online by the weights it trains,
then continues from that checkpoint (`solver_start`); whichever checkpoint comes last is served
to both roles (`serve_proposer_checkpoint` when the solver step published none). It refuses to
train the policy on transcripts another model wrote (`--proposer-model`).

`adopt_checkpoint` is the swap both the training node and the cold start use: after it, the
proposer's and the solver's model configs name the new checkpoint. `run_modes` is the line the
manifest and the round report show.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from autoenvscaling.graphs.models import Policy

if TYPE_CHECKING:
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel_state import FlywheelState
    from autoenvscaling.tools.run_dir import RunDir
    from autoenvscaling.training.policy import Checkpoint, PolicyServer


def run_modes(ctx: FlywheelContext) -> str:
    """The comparison arms this run belongs to, in one line (manifest and report)."""
    if not (ctx.train and ctx.proposer_training):
        proposer = "off"
    elif ctx.proposer_model and ctx.proposer_model != ctx.policy_model:
        proposer = f"refused ({ctx.proposer_model} proposes, not the policy)"
    else:
        proposer = (
            f"on (every {ctx.proposer_update_every} round(s), groups of "
            f"{ctx.proposer_group_size}; from the checkpoint that sampled, "
            "no sampler-logprob correction)"
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


def foreign_proposer(ctx: FlywheelContext, policy: Policy) -> str | None:
    """Why the proposer's episodes are not the policy's own (None when they are)."""
    if ctx.proposer_model and ctx.proposer_model != policy.model:
        return (
            f"the proposer is {ctx.proposer_model} (--proposer-model), not the policy "
            f"({policy.model}): its transcripts are another model's samples, and a GRPO update "
            "on them would train the policy to imitate that model, not reinforce its own "
            "proposals; proposer training refused, the policy is unchanged"
        )
    endpoint = ctx.policy_base_url or policy.base_url
    if ctx.proposer_base_url and ctx.proposer_base_url != endpoint:
        return (
            f"the proposer is served at {ctx.proposer_base_url}, not by the policy's server "
            f"({endpoint}): its transcripts may be another model's samples; proposer training "
            "refused, the policy is unchanged"
        )
    return None


async def train_proposer(
    ctx: FlywheelContext, run: RunDir, state: FlywheelState, policy: Policy
) -> tuple[dict[str, Any], Checkpoint | None]:
    """The proposer's GRPO update on this round's attempts, from `policy` (the one that sampled
    them); (summary, published checkpoint or None). It serves nothing: the solver step continues
    from the checkpoint, and the training node serves the last one."""
    from autoenvscaling.training.proposer.update import plan_proposer_update, update_due

    round_ = state["round"]
    if not (ctx.train and ctx.proposer_training):
        return {"reason": "proposer training is off for this run"}, None
    foreign = foreign_proposer(ctx, policy)
    if foreign:
        return {"reason": foreign}, None
    if not update_due(round_, ctx.proposer_update_every):
        return {
            "reason": f"the proposer updates every {ctx.proposer_update_every} rounds; "
            f"not in round {round_}"
        }, None
    if not ctx.base_model:
        return {"reason": "no base_model (HF weights) configured: nothing to train"}, None
    since = round_ - max(1, ctx.proposer_update_every) + 1
    plan = plan_proposer_update(
        run.rollouts,
        rounds=list(range(since, round_ + 1)),
        run_id=state.get("run_id"),
        policy_version=policy.version,
        model=policy.model,
    )
    summary: dict[str, Any] = {"start": policy.checkpoint_id or "base", **plan.summary()}
    if plan.reason:
        summary["reason"] = plan.reason
        return summary, None
    work = run.root / "train" / f"r{round_:02d}-proposer"
    work.mkdir(parents=True, exist_ok=True)
    (work / "plan.json").write_text(plan.model_dump_json(indent=2))

    from autoenvscaling.training.backend import TrainHyperParams, TrainingError
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.proposer.update import (
        DEFAULT_TEMPERATURE,
        ProposerJob,
        TRLProposerBackend,
    )

    registry = CheckpointRegistry(run.checkpoints)
    job = ProposerJob(
        job_id=f"{state['run_id']}-r{round_:02d}-proposer",
        base_model=ctx.base_model,
        parent=registry.get(policy.checkpoint_id) if policy.checkpoint_id else None,
        groups=plan.groups,
        group_size=plan.group_size,
        hyper=TrainHyperParams(steps=ctx.proposer_train_steps, trl_config=ctx.proposer_trl_config),
        temperature=plan.temperature or DEFAULT_TEMPERATURE,
        work_dir=work,
    )
    try:
        # CURRENT moves only when a checkpoint is served (the training node), never before.
        result = await TRLProposerBackend(registry, make_current=False).train(job)
    except TrainingError as exc:
        summary.update(error=str(exc)[-1500:], reason="proposer training failed; policy unchanged")
        return summary, None
    summary.update(
        steps=result.steps_done,
        seconds=round(result.duration_sec, 1),
        param_change_l2=result.metrics.get("param_change_l2"),
        schedule=result.metrics.get("schedule"),
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
    return summary, result.checkpoint


def solver_start(state: FlywheelState, checkpoint: Checkpoint | None) -> FlywheelState:
    """The state the solver's GRPO step starts from: the proposer's new checkpoint when there is
    one (its episodes are generated online, so it is on-policy from wherever it starts)."""
    if checkpoint is None:
        return state
    policy = state["policy"].model_copy(
        update={"checkpoint_id": checkpoint.id, "version": checkpoint.id}
    )
    return cast("FlywheelState", {**state, "policy": policy})


async def serve_proposer_checkpoint(
    ctx: FlywheelContext, run: RunDir, checkpoint: Checkpoint, current: Policy
) -> tuple[dict[str, Any], Policy | None]:
    """Serve the proposer's checkpoint to both roles (the solver step published none after it);
    (what the summary gains, the new policy or None)."""
    from autoenvscaling.training.checkpoints import CheckpointRegistry
    from autoenvscaling.training.policy import PolicySwapError

    server = ctx.servers.for_config(ctx)
    if server is None:
        return {
            "reason": "checkpoint published; no policy server swaps it in (policy_server=none)"
        }, None
    try:
        new = await adopt_checkpoint(checkpoint, server, current)
    except PolicySwapError as exc:
        return {"reason": f"swap failed, the previous policy stays: {exc}"}, None
    CheckpointRegistry(run.checkpoints).set_current(checkpoint.id)
    return {"served_as": new.model}, new
