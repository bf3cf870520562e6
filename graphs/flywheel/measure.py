"""What the flywheel measures with the served policy: each role's model, the solver's recorded attempts (the baseline, the held-out folder, the pool's refresh) and the run's splits.

Nodes (nodes.py) call these; the solver graph they run in is passed by the calling node, so Studio draws it nested (graphs/agent/nesting.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final, Literal

from ...tools.report.proposer_heldout import ProposerHeldoutEval
from ...tools.rollouts.claims import run_once
from ...tools.rollouts.models import Attempt
from ...tools.rollouts.store import RolloutStore
from ...tools.run_dir import RunDir
from ...tools.tasks.pool import Pool, PoolEntry
from ...tools.tasks.splits import SplitCheck, check_splits, task_folders
from ..agent.loop import LoopBudget
from ..agent.nesting import non_durable
from ..config import REPO_SEED, FlywheelContext
from ..models import ModelConfig, Policy
from ..proposer.episode import attempt_graph as proposer_graph
from ..solver.attempt import SolverAttempt, SolverSettings, attempt_id_for
from ..solver.builder import SolverContext, SolveRun
from ..solver.builder import graph as solver_graph
from .proposer_heldout import evaluate_proposer_heldout

#: langgraph's END, typed as the literal the nodes' `Command[Literal[...]]` routes name.
END: Final = "__end__"


#: A graph invoked with no context at all has no policy server (pass `FlywheelContext()` for the
#: embedded default: the graph then starts it).
_NO_CONTEXT = FlywheelContext(policy_server="none")


def role_model(
    ctx: FlywheelContext, policy: Policy, role: Literal["proposer", "solver"]
) -> ModelConfig:
    """Both roles use the shared policy unless this role is configured apart.

    The endpoint is a live resource, not a fact of the graph state: the process running the
    graph established `ctx.policy_base_url` (a resumed run starts a new server on a new port),
    so it wins over whatever URL a checkpointed state or a pending Send still carries."""
    if ctx.policy_base_url and policy.base_url != ctx.policy_base_url:
        policy = policy.model_copy(update={"base_url": ctx.policy_base_url})
    model = ctx.proposer_model if role == "proposer" else ctx.solver_model
    base_url = ctx.proposer_base_url if role == "proposer" else ctx.solver_base_url
    override = ModelConfig(model=model, base_url=base_url) if model else None
    update: dict[str, Any] = {"max_tokens": ctx.max_tokens, "temperature": ctx.temperature}
    if override is None:  # the window is the shared policy's; an override's is not known
        update["context_window"] = ctx.context_window
    return ModelConfig.for_policy(policy, override).model_copy(update=update)


def served_checkpoints(ctx: FlywheelContext, policy: Policy) -> dict[str, str]:
    """What each role is served while `policy` is the shared one: its checkpoint (`base` before
    any swap), or the model a role is configured apart with. Read from the role model configs
    of the policy the graph holds, never from which update ran last."""
    shared = policy.checkpoint_id or policy.version
    served: dict[str, str] = {}
    for role in ("proposer", "solver"):
        config = role_model(ctx, policy, role)
        served[role] = shared if config.model == policy.model else config.model
    return served


def min_valid(attempts: int) -> int:
    """Attempts that must finish without infrastructure failure before a mean means anything."""
    return max(1, (attempts + 1) // 2)


def refresh_window(entries: list[PoolEntry], round_: int, limit: int) -> list[PoolEntry]:
    """The pool tasks round `round_` re-measures: all of them (limit 0), else `limit` from a
    window that moves on by `limit` each round, so a limit below the pool's size reaches every
    task in turn (the first few by id would be the only ones ever measured)."""
    if not limit or not entries:
        return entries
    start = (round_ - 1) * limit % len(entries)
    return (entries[start:] + entries[:start])[:limit]


def decontamination_status(ctx: FlywheelContext) -> str:
    """What the manifest and every round report say about decontamination."""
    sources = ctx.decontam_sources()
    if not sources:
        return (
            "NOT CONFIGURED: no held-out benchmark given (--decontam PATH, --heldout DIR); "
            "admitted tasks were not checked for overlap with any benchmark"
        )
    return f"13-gram overlap checked against: {', '.join(sources)}"


def seed_folder(ctx: FlywheelContext) -> Path:
    """The folder the pool starts from."""
    return Path(ctx.seed_dir) if ctx.seed_dir else REPO_SEED


def run_splits(ctx: FlywheelContext) -> SplitCheck:
    """The run's splits (the cold start's only when the run starts from one) and whether any two
    share a task: the manifest and every round report name it."""
    return check_splits(
        {
            "cold_start": ctx.cold_start_tasks if ctx.cold_start else None,
            "pool_seed": seed_folder(ctx),
            "heldout": ctx.heldout_dir,
        }
    )


def attempter(
    ctx: FlywheelContext, run: RunDir, run_id: str, round_: int, policy: Policy, solver: Any
) -> Any:
    """`attempt(task_dir, sample, tags)`: one recorded solver attempt with the current policy,
    at most `concurrency` in flight; returns its reward, None when it is not scored: an
    infrastructure failure or the task's fault (tools/trials/faults.py; the rollout store keeps
    which in the attempt's `fault` metadata). Neither is the policy's failure.

    `solver`: the compiled solver graph (graphs/solver/builder.py) the attempts run in, never
    checkpointed (graphs/agent/nesting.py); the calling node names it, so Studio draws it nested."""
    settings = SolverSettings(
        model=role_model(ctx, policy, "solver"),
        budget=LoopBudget(max_turns=ctx.solver_max_turns),
        store_path=run.store,
        run_id=run_id,
        round=round_,
        policy_version=policy.version,
        tool_output_chars=ctx.tool_output_chars,
    )
    gate = asyncio.Semaphore(ctx.concurrency)

    async def attempt(path: Path, sample: int, tags: dict[str, str]) -> float | None:
        one = SolveRun(
            tasks=[str(path)],
            attempts=1,
            first_sample=sample,
            settings=settings.model_copy(update={"tags": tags}).model_dump(mode="json"),
            trials_dir=str(run.trials),
        )

        async def solve() -> float | None:
            out = await non_durable(solver).ainvoke(
                one, context=SolverContext(backend=ctx.backend), durability="exit"
            )
            result = SolverAttempt.model_validate(out["results"][0])
            return None if result.fault is not None else (result.reward or 0.0)

        if not run.on_postgres:
            async with gate:
                return await solve()
        # Coordinators sharing the store run each attempt once (tools/rollouts/claims.py): the
        # id is the one solve_task records the attempt under; the slot is held only while this
        # process takes or runs it.
        attempt_id = attempt_id_for(settings, path, sample)
        return await run_once(run.store, attempt_id, solve, stored_reward, slot=gate)

    return attempt


def stored_reward(attempt: Attempt) -> float | None:
    """What `attempt` returns for an attempt another coordinator ran: None for a fault."""
    return None if attempt.metadata.get("fault") else (attempt.reward or 0.0)


async def measure_baseline(
    ctx: FlywheelContext, run: RunDir, run_id: str, policy: Policy, solver: Any = None
) -> int:
    """Before round one's proposers: the current policy attempts up to `baseline_tasks` pool
    tasks `baseline_attempts` times each (round 0, tag purpose=baseline), so the first brief
    holds real attempts. Idempotent: a resumed run that already measured skips it.
    Returns the number of attempts made."""
    if ctx.baseline_tasks <= 0 or ctx.baseline_attempts <= 0:
        return 0
    with RolloutStore(run.store) as store:
        done = [
            a
            for a in store.list_attempts(run_id=run_id, role="solver", limit=100_000)
            if a.metadata.get("purpose") == "baseline" and a.outcome is not None
        ]
    if done:
        return 0
    pool = Pool(run.pool)
    entries = pool.entries("active")[: ctx.baseline_tasks]
    attempt = attempter(ctx, run, run_id, 0, policy, solver or solver_graph)

    async def one(entry: PoolEntry) -> int:
        results = await asyncio.gather(
            *(
                attempt(pool.path(entry.task_id), i, {"purpose": "baseline"})
                for i in range(ctx.baseline_attempts)
            )
        )
        rewards = [r for r in results if r is not None]
        if len(rewards) >= min_valid(ctx.baseline_attempts):
            pool.record_eval(entry.task_id, 0, rewards)  # measured, never retired here
        return len(results)

    return sum(await asyncio.gather(*(one(e) for e in entries)))


#: The purpose tag of held-out attempts: the report, the brief and training tell them apart by it.
HELDOUT: Final = "heldout"


async def evaluate_heldout(
    ctx: FlywheelContext,
    run: RunDir,
    run_id: str,
    round_: int,
    policy: Policy,
    solver: Any = None,
) -> int:
    """The served solver on the held-out folder (`--heldout`, any folder of Harbor tasks):
    `heldout_samples` attempts per task, recorded as round `round_` (0: before round 1) with
    tag purpose=heldout. Nothing else reads them: the tasks are never copied into the pool, so
    no refresh, GRPO group or cold start sees them. Idempotent per round (a resumed run that
    evaluated this round skips it). Returns the attempts made."""
    if not ctx.heldout_dir or ctx.heldout_samples <= 0:
        return 0
    tasks = task_folders(ctx.heldout_dir)
    if not tasks:
        return 0
    with RolloutStore(run.store) as store:
        done = any(
            a.round == round_ and a.metadata.get("purpose") == HELDOUT and a.outcome is not None
            for a in store.list_attempts(run_id=run_id, role="solver", limit=1_000_000)
        )
    if done:
        return 0
    attempt = attempter(ctx, run, run_id, round_, policy, solver or solver_graph)
    tags = {"purpose": HELDOUT, "split": str(ctx.heldout_dir)}
    results = await asyncio.gather(
        *(attempt(path, i, tags) for path in tasks for i in range(ctx.heldout_samples))
    )
    return len(results)


async def proposer_heldout_point(
    ctx: FlywheelContext, run: RunDir, run_id: str, round_: int, policy: Policy
) -> ProposerHeldoutEval | None:
    """The served proposer on the held-out briefs (graphs/flywheel/proposer_heldout.py), point `round_`."""
    model = role_model(ctx, policy, "proposer")
    return await evaluate_proposer_heldout(ctx, run, run_id, round_, policy, model, proposer_graph)
