"""Both roles learn, in one shape: each picks its data and builds its job (`train_solver`: the
round's admitted and replay tasks; `train_proposer`: groups of the round's proposer attempts);
`_train` runs the TRL backend, reports and records the checkpoint in the lineage, and
`serve_checkpoint` swaps it in for both roles (graphs/models.py: `adopt_checkpoint`, which the cold start uses too).

In the training node the proposer trains first, from the checkpoint that sampled its episodes
(the state's policy), so its update is on-policy (training/proposer/update.py); it refuses
transcripts another model wrote (`--proposer-model`) and serves nothing. The solver's step, whose
episodes are generated online by the weights it trains, continues from that checkpoint
(`solver_start`) and serves its own; when it serves none, the proposer's is served.
`run_modes` is the line the manifest and the round report show.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ...tools.stats import group_variance_chance
from ...tools.tasks.pool import Pool, PoolEntry
from ...training.backend import TrainHyperParams, TrainingError, TrainJob, TrainResult
from ...training.checkpoints import CheckpointRegistry
from ...training.grpo.trl_backend import TRLGRPOBackend
from ...training.policy import Checkpoint, PolicySwapError
from ...training.proposer.update import (
    DEFAULT_TEMPERATURE,
    ProposerJob,
    TRLProposerBackend,
    plan_proposer_update,
    update_due,
)
from ...training.worker_backend import WorkerBackend
from ..models import Policy, adopt_checkpoint
from .episode_budget import solver_episode

if TYPE_CHECKING:
    from ...tools.run_dir import RunDir
    from ..config import FlywheelContext
    from .state import FlywheelState


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


async def serve_checkpoint(
    ctx: FlywheelContext, run: RunDir, checkpoint: Checkpoint, current: Policy
) -> tuple[dict[str, Any], Policy | None]:
    """Serve `checkpoint` to both roles and make it the registry's CURRENT; (what the training
    role's summary gains, the new policy or None)."""
    server = ctx.servers.for_config(ctx)
    if server is None:
        return {
            "reason": "checkpoint published but no policy server swaps it in "
            "(policy_server=none); both roles keep the served model"
        }, None
    try:
        new = await adopt_checkpoint(checkpoint, server, current)
    except PolicySwapError as exc:
        return {"reason": f"swap failed, the previous policy stays: {exc}"}, None
    CheckpointRegistry(run.checkpoints).set_current(checkpoint.id)
    return {"served_as": new.model.removeprefix("openai:")}, new


async def _train(
    role: Literal["solver", "proposer"],
    backend: type[WorkerBackend],
    job: TrainJob,
    run: RunDir,
    round_: int,
    summary: dict[str, Any],
    report: Callable[[TrainResult], dict[str, Any]],
) -> tuple[dict[str, Any], Checkpoint | None]:
    """The steps both roles share once their job is built: train, add `report(result)` to
    `summary`, record the published checkpoint in the run's lineage; (summary, checkpoint or
    None, with `summary["reason"]` saying why)."""
    try:
        # CURRENT moves only when a checkpoint is served (`serve_checkpoint`), never before.
        result = await backend(CheckpointRegistry(run.checkpoints), make_current=False).train(job)
    except TrainingError as exc:
        summary.update(error=str(exc)[-1500:], reason="training failed; the policy is unchanged")
        return summary, None
    summary.update(report(result))
    checkpoint = result.checkpoint
    if checkpoint is None:
        summary["reason"] = result.reason or "no checkpoint published; the policy is unchanged"
        return summary, None
    summary["checkpoint"] = checkpoint.id
    # The solver's rows name no role: they predate the proposer's training.
    named = {"role": role} if role == "proposer" else {}
    run.add_lineage(
        {
            "round": round_,
            **named,
            "checkpoint": checkpoint.id,
            "parent": checkpoint.parent_id,
            "base_model": checkpoint.base_model,
            "kind": checkpoint.kind,
        }
    )
    return summary, checkpoint


def _parent(run: RunDir, policy: Policy) -> Checkpoint | None:
    """The checkpoint a role's update starts from (None: the base model)."""
    registry = CheckpointRegistry(run.checkpoints)
    return registry.get(policy.checkpoint_id) if policy.checkpoint_id else None


# -- the solver ----------------------------------------------------------------------------------
async def train_solver(
    ctx: FlywheelContext, run: RunDir, state: FlywheelState, policy: Policy
) -> tuple[dict[str, Any], Policy | None]:
    """The solver's GRPO step on the round's admitted + replay tasks, from `policy`; serves its
    checkpoint to both roles: (summary, new policy or None)."""
    if not ctx.train:
        return {"reason": "training skipped (train=false); the policy is unchanged"}, None
    if ctx.train_steps <= 0:
        return {"reason": "train_steps is 0: the solver is not trained in this run"}, None
    round_ = state["round"]
    pool = Pool(run.pool)
    admitted = [c.task_id for c in state.get("candidates", []) if c.round == round_ and c.admitted]
    active = [e for e in pool.entries("active") if e.task_id not in admitted]
    replay = [e.task_id for e in active]
    priority = replay_priority(active, ctx.num_generations)
    if not admitted and not replay:
        return {
            "reason": "no admitted or in-band pool tasks to train on; the policy is unchanged"
        }, None
    if not ctx.base_model:
        return {
            "reason": "no base_model (HF weights of the policy) configured: training needs "
            "the policy's weights; the policy is unchanged"
        }, None
    job = solver_job(ctx, run, state["run_id"], round_, policy, admitted, replay, priority)
    summary, checkpoint = await _train(
        "solver", TRLGRPOBackend, job, run, round_, {}, lambda r: _solver_report(r, admitted)
    )
    if checkpoint is None:
        return summary, None
    served, new = await serve_checkpoint(ctx, run, checkpoint, policy)
    summary.update(served)
    return summary, new


def replay_priority(entries: list[PoolEntry], group: int) -> dict[str, float]:
    """Each replay task's chance that a GRPO group of `group` rollouts has reward variance, from
    its baseline and refresh measures pooled (tools/stats.py `group_variance_chance`): the
    step plan draws the likeliest first, so a round's few groups go where the solver sometimes
    succeeds, not to tasks it has failed every time."""
    return {
        e.task_id: group_variance_chance(
            sum(p.mean_reward * p.n for p in e.history), sum(p.n for p in e.history), group
        )
        for e in entries
    }


def round_seed(round_: int) -> int:
    """The training seed of round `round_`: TRL's sampling and the replay shuffle
    (`plan_steps`) differ each round, so successive rounds neither draw the same rollouts nor
    replay the pool in the same order."""
    return round_


def solver_job(
    ctx: FlywheelContext,
    run: RunDir,
    run_id: str,
    round_: int,
    policy: Policy,
    admitted: list[str],
    replay: list[str],
    priority: dict[str, float] | None = None,
) -> TrainJob:
    """The solver's GRPO job of round `round_` on pool tasks `admitted` + `replay` (drawn by
    `priority`, `replay_priority`)."""
    pool = Pool(run.pool)
    assert ctx.base_model  # train_solver says why there is no job without one
    return TrainJob(
        job_id=f"{run_id}-r{round_:02d}",
        base_model=ctx.base_model,
        parent=_parent(run, policy),
        task_dirs=[pool.path(t) for t in admitted],
        replay_task_dirs=[pool.path(t) for t in replay],
        replay_priority=priority or {},
        hyper=TrainHyperParams(
            steps=ctx.train_steps,
            num_generations=ctx.num_generations,
            learning_rate=ctx.learning_rate,
            tasks_per_step=min(ctx.train_tasks_per_step, max(1, len(admitted) + len(replay))),
            **solver_episode(ctx),  # a training episode is a served episode
            seed=round_seed(round_),
            trl_config=ctx.train_trl_config,
        ),
        work_dir=run.root / "train" / f"r{round_:02d}",
        sandbox_backend=ctx.backend,
    )


def _solver_report(result: TrainResult, admitted: list[str]) -> dict[str, Any]:
    # Task ids, not paths: what each optimizer step trained on (admitted first).
    steps = [[Path(t).name for t in step] for step in result.metrics.get("step_tasks") or []]
    return {
        "steps": result.steps_done,
        "groups": result.groups_total,
        "groups_without_reward_variance": result.groups_dropped_no_variance,
        "seconds": round(result.duration_sec, 1),
        **{k: v for k, v in result.metrics.items() if isinstance(v, int | float | str)},
        # What the update did to behaviour (rewarded / penalised logp before -> after, probe KL);
        # param_change_l2 above is a diagnostic of the optimizer, not a measure of learning.
        **(result.behaviour.summary() if result.behaviour else {}),
        "episode": result.metrics.get("episode"),  # what TRL ran, from the served budgets
        "step_tasks": steps,
        "admitted_trained": sorted({t for step in steps for t in step} & set(admitted)),
    }


def solver_start(policy: Policy, checkpoint: Checkpoint | None) -> Policy:
    """The policy the solver's GRPO step starts from: the proposer's new checkpoint when there is
    one (its episodes are generated online, so it is on-policy from wherever it starts)."""
    if checkpoint is None:
        return policy
    return Policy.serving(policy.model, policy.base_url, policy.tool_choice, checkpoint.id)


# -- the proposer --------------------------------------------------------------------------------
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
        run.store,
        rounds=list(range(since, round_ + 1)),
        run_id=state.get("run_id"),
        policy_version=policy.version,
        model=policy.model,
        arm=ctx.proposer_reward,
    )
    summary: dict[str, Any] = {"start": policy.checkpoint_id or "base", **plan.summary()}
    if plan.reason:
        summary["reason"] = plan.reason
        return summary, None
    work = run.root / "train" / f"r{round_:02d}-proposer"
    work.mkdir(parents=True, exist_ok=True)
    (work / "plan.json").write_text(plan.model_dump_json(indent=2))

    job = ProposerJob(
        job_id=f"{state['run_id']}-r{round_:02d}-proposer",
        base_model=ctx.base_model,
        parent=_parent(run, policy),
        groups=plan.groups,
        group_size=plan.group_size,
        hyper=TrainHyperParams(
            steps=ctx.proposer_train_steps,
            learning_rate=ctx.learning_rate,
            seed=round_seed(round_),
            trl_config=ctx.proposer_trl_config,
        ),
        temperature=plan.temperature or DEFAULT_TEMPERATURE,
        work_dir=work,
    )
    return await _train("proposer", TRLProposerBackend, job, run, round_, summary, _proposer_report)


def _proposer_report(result: TrainResult) -> dict[str, Any]:
    return {
        "steps": result.steps_done,
        "seconds": round(result.duration_sec, 1),
        "param_change_l2": result.metrics.get("param_change_l2"),
        "schedule": result.metrics.get("schedule"),
        # Episodes cut to the trainer's completion length (training/proposer/worker.py).
        "truncation": result.metrics.get("truncation"),
        # What the update did to behaviour (rewarded / penalised logp before -> after, probe KL).
        **(result.behaviour.summary() if result.behaviour else {}),
    }
