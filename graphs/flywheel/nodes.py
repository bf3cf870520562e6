"""The flywheel: inspect -> propose (fan-out) -> admit (gate per candidate) -> train -> refresh -> ...

One round reads the solver's experience from the rollout store, lets K proposers write candidate
environments, admits what the validation gate accepts into the pool, trains the shared policy on
the round's admitted and replay tasks, swaps the new checkpoint in for both roles, and re-measures
the pool with the new policy, retiring tasks that left the difficulty band.

`graph` (for langgraph.json / Studio) is compiled without a checkpointer; `build_flywheel()` takes
one for durable runs (the CLI uses SQLite in the run folder) and for embedding in other apps.

The policy: the CLI starts the server its run names and passes the endpoint. A context that names
no model and no endpoint (Studio's default, `FlywheelContext()`) is the embedded default: the
first node of the run starts the embedded server (graphs/flywheel/roles.py:
`serve_embedded_default`), every node runs under the context resolved for it, and the run stops
the server when it ends (`refresh` on the way out) or pauses for review (`review`). The input's
`rounds` is the number of rounds the run goes to (the context's `rounds` when the input has none).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Final, Literal

from langgraph.errors import GraphInterrupt
from langgraph.runtime import Runtime
from langgraph.types import Command, Send, interrupt

from ...tools.agents.brief import build_brief
from ...tools.report.links import candidate_links, links_markdown
from ...tools.report.metrics import CandidateRecord, PriceTable, round_metrics
from ...tools.report.run_report import load_history, round_markdown, save_history
from ...tools.rollouts.store import RolloutStore
from ...tools.run_dir import RunDir
from ...tools.sandbox.harbor_backends import check_stages
from ...tools.tasks.format import TaskFormatError, load_task
from ...tools.tasks.pool import BandDecision, Pool, PoolCopyError, PoolEntry, band_decision
from ...tools.tasks.splits import task_folders
from ..config import FlywheelContext
from ..models import Policy
from ..proposer.episode import attempt_graph as proposer_graph
from ..solver.builder import graph as solver_graph
from ..validation.builder import graph as validation_graph
from .admission import run_gate, run_proposer
from .episode_budget import episode_record
from .measure import (
    attempter,
    decontamination_status,
    evaluate_heldout,
    measure_baseline,
    min_valid,
    proposer_heldout_point,
    refresh_window,
    role_model,
    run_splits,
    seed_folder,
    served_checkpoints,
)
from .proposer_heldout import load_point
from .roles import release_embedded_default, serve_embedded_default
from .state import AdmitItem, FlywheelState, SlotTask, TrainingSummary
from .training import run_modes, serve_checkpoint, solver_start, train_proposer, train_solver

#: langgraph's END, typed as the literal the nodes' `Command[Literal[...]]` routes name.
END: Final = "__end__"


#: A graph invoked with no context at all has no policy server (pass `FlywheelContext()` for the
#: embedded default: the graph then starts it).
_NO_CONTEXT = FlywheelContext(policy_server="none")


def _ctx(runtime: Runtime[FlywheelContext]) -> FlywheelContext:
    """The context the node runs under: the one the graph resolved when it started the embedded
    default for this run, else the run's own."""
    ctx = runtime.context or _NO_CONTEXT
    return ctx.served or ctx


async def _serving(runtime: Runtime[FlywheelContext], policy: Policy | None) -> FlywheelContext:
    """`_ctx`, after starting the embedded default if this run needs it and nothing started it
    (the first node of a run, or of a resumed one: `policy` is what the state serves)."""

    return await serve_embedded_default(runtime.context or _NO_CONTEXT, policy)


def _rounds(state: FlywheelState, ctx: FlywheelContext) -> int:
    """The rounds the run goes to: the input's, else the context's."""
    return state.get("rounds") or ctx.rounds


def _run(ctx: FlywheelContext) -> RunDir:
    return RunDir(Path(ctx.run_dir), store=ctx.store)


def _timed(state: FlywheelState, stage: str, started: float) -> dict[str, float]:
    seconds = dict(state.get("stage_seconds", {}))
    seconds[stage] = round(seconds.get(stage, 0.0) + time.monotonic() - started, 2)
    return seconds


# -- nodes -------------------------------------------------------------------------------------
async def setup(state: FlywheelState, runtime: Runtime[FlywheelContext]) -> dict[str, Any]:
    """Create the run folder and the initial pool (idempotent: a resumed run skips it); start the
    embedded default policy when the context names no other and nothing started it."""
    # The proposers' workspaces and our solver's attempts (baseline, refresh, calibration): a
    # backend that cannot serve them is refused here, before the run folder, a policy or any
    # sandbox exists (every Harbor type can: our terminal runs over `exec` there).
    check_stages(_ctx(runtime).backend, ["propose", "solve"])
    ctx = await _serving(runtime, state.get("policy"))
    run = _run(ctx)
    splits = await asyncio.to_thread(run_splits, ctx)
    config = {
        **ctx.model_dump(),
        "rounds": _rounds(state, ctx),
        "decontamination": decontamination_status(ctx),
        "episodes": episode_record(ctx),  # the served episode and the GRPO one, side by side
        "splits": splits.model_dump(mode="json"),
        "splits_check": splits.summary(),
    }
    manifest = await asyncio.to_thread(run.create, config)
    pool = Pool(run.pool)
    seed = seed_folder(ctx)
    if not pool.entries() and seed.exists():
        await asyncio.to_thread(pool.seed_from, seed)
    RolloutStore(run.store).close()  # creates the schema once
    if ctx.policy_checkpoint_id and not state.get("policy"):
        # A checkpoint swapped in before round 1 (--cold-start): the lineage starts with it.
        await asyncio.to_thread(
            run.add_lineage,
            {"round": 0, "checkpoint": ctx.policy_checkpoint_id, "adopted": "before round 1"},
        )
    policy = state.get("policy") or Policy.serving(
        ctx.policy_model, ctx.policy_base_url, ctx.policy_tool_choice, ctx.policy_checkpoint_id
    )
    return {"run_id": manifest.run_id, "round": state.get("round", 1), "policy": policy}


async def inspect(state: FlywheelState, runtime: Runtime[FlywheelContext]) -> dict[str, Any]:
    """A compact brief of the solver's experience for the proposers."""
    ctx = await _serving(runtime, state["policy"])
    started, round_started = time.monotonic(), time.time()
    run = _run(ctx)

    seconds: dict[str, float] = {}
    if state["round"] == 1:
        await measure_baseline(ctx, run, state["run_id"], state["policy"], solver_graph)
        seconds["baseline"] = round(time.monotonic() - started, 2)
        # Before round 1: the policy the run starts from, on the held-out split (round 0).
        before = time.monotonic()
        await evaluate_heldout(ctx, run, state["run_id"], 0, state["policy"], solver_graph)
        seconds["heldout_before"] = round(time.monotonic() - before, 2)
        before = time.monotonic()
        await proposer_heldout_point(ctx, run, state["run_id"], 0, state["policy"])
        seconds["proposer_heldout_before"] = round(time.monotonic() - before, 2)

    brief = await asyncio.to_thread(
        build_brief,
        run.store,
        run.pool,
        solver_feedback=ctx.solver_feedback,
        band=(ctx.band_low, ctx.band_high),
        round=state["round"],
        policy_version=state["policy"].version,
        n_examples=ctx.brief_examples,
        max_file_chars=ctx.brief_file_chars,
        variant=state["round"],
        # The held-out attempts stay out of the proposers' evidence (they would leak its tasks).
        exclude_tasks=frozenset(p.name for p in task_folders(ctx.heldout_dir)),
    )
    return {
        "brief": brief,
        # The round starts here, before the inspect stage: `review` subtracts inspect's seconds.
        "round_started": round_started,
        # Each stage its own seconds: inspect's are the brief's, not the evaluations' above.
        "stage_seconds": {
            **seconds,
            "inspect": round(max(time.monotonic() - started - sum(seconds.values()), 0.0), 2),
        },
    }


def propose(
    state: FlywheelState, runtime: Runtime[FlywheelContext]
) -> Command[Literal["propose_one", "review"]]:
    """Fan out K proposers; each carries what it needs (Send state is per branch)."""
    ctx = _ctx(runtime)
    if ctx.proposals <= 0:
        return Command(goto="review")
    return Command(
        goto=[
            Send(
                "propose_one",
                SlotTask(
                    slot=slot,
                    round=state["round"],
                    run_id=state["run_id"],
                    policy=state["policy"],
                    brief=state["brief"],
                ),
            )
            for slot in range(ctx.proposals)
        ]
    )


async def propose_one(
    state: SlotTask, runtime: Runtime[FlywheelContext]
) -> Command[Literal["admit_one"]]:
    """One proposer attempt in its own workspace: episodes and revisions against the gate's
    checks (all but calibrate), recorded as a proposer rollout."""
    task = state  # the slot's task, sent by `propose`

    ctx = await _serving(runtime, task.policy)
    # The attempt graph (episode -> gate -> revise) runs as this node's subgraph.
    candidate = await run_proposer(
        ctx, _run(ctx), task, role_model(ctx, task.policy, "proposer"), proposer_graph
    )
    return Command(goto=Send("admit_one", AdmitItem(**dict(task), candidate=candidate)))


async def admit_one(state: AdmitItem, runtime: Runtime[FlywheelContext]) -> dict[str, Any]:
    """The validation gate on one final candidate; admitted tasks join the pool."""
    item = state  # the final candidate, sent by `propose_one`

    ctx = await _serving(runtime, item.policy)
    run = _run(ctx)
    # The validation graph runs as this node's subgraph.
    record: CandidateRecord = await run_gate(
        ctx, run, item, role_model(ctx, item.policy, "solver"), validation_graph
    )
    if record.admitted:
        try:
            task = load_task(Path(record.snapshot or record.path))
            category, difficulty = task.category or "", task.difficulty or ""
        except TaskFormatError:
            category = difficulty = ""

        try:
            # The pool receives the frozen bytes the gate checked, never the live candidate folder.
            Pool(run.pool).add(
                Path(record.snapshot or record.path),
                PoolEntry(
                    task_id=record.task_id,
                    category=category,
                    difficulty=difficulty,
                    source="proposed",
                    admitted_round=item.round,
                    content_hash=record.content_hash,
                ),
            )
        except PoolCopyError as exc:  # not plain files, or changed after the gate: the task's fault
            record = record.model_copy(
                update={
                    "admitted": False,
                    "stage": "lint",
                    "reason": f"cannot be copied into the pool: {exc}",
                    "proposer_reward": -1.0,
                }
            )
    return {"candidates": [record]}


def propose_admit_seconds(state: FlywheelState, now: float) -> dict[str, float]:
    """The stage seconds with the wall time of the propose/admit branches: from the round's
    start (set before inspect) to `now`, less the seconds of the stages before it (inspect and,
    in round 1, the baseline and the evaluations before round 1); never negative."""
    seconds = dict(state.get("stage_seconds", {}))
    elapsed = now - state.get("round_started", now) - sum(seconds.values())
    seconds["propose_admit"] = round(max(elapsed, 0.0), 2)
    return seconds


async def review(state: FlywheelState, runtime: Runtime[FlywheelContext]) -> dict[str, Any]:
    """Optional human review: pause with this round's admissions; the reply lists vetoed task ids."""
    ctx = await _serving(runtime, state["policy"])
    # Proposing and admitting run as parallel branches; their wall time is measured here.
    seconds = propose_admit_seconds(state, time.time())
    if not ctx.human_review:
        return {"stage_seconds": seconds}
    admitted = [c for c in state.get("candidates", []) if c.round == state["round"] and c.admitted]
    if not admitted:
        return {"stage_seconds": seconds}
    try:
        vetoed = interrupt(
            {
                "round": state["round"],
                "admitted": [{"task_id": c.task_id, "path": c.path} for c in admitted],
                "resume_with": "a list of task ids to veto (empty list keeps all)",
            }
        )
    except GraphInterrupt:
        # The run pauses here: a server the graph started stops; the resumed run starts one.
        await release_embedded_default(runtime.context or _NO_CONTEXT)
        raise
    pool = Pool(_run(ctx).pool)
    for task_id in vetoed or []:
        if any(e.task_id == task_id for e in pool.entries("active")):
            pool.retire(task_id, state["round"], "vetoed by human review")
    return {"stage_seconds": seconds}


async def train(state: FlywheelState, runtime: Runtime[FlywheelContext]) -> dict[str, Any]:
    """Train the shared policy on this round's admitted tasks plus replay; swap it in for both roles."""

    ctx = await _serving(runtime, state["policy"])
    started = time.monotonic()
    # The proposer first, from the checkpoint that sampled its episodes (on-policy); then the
    # solver, whose GRPO episodes are generated online, from the proposer's checkpoint. The last
    # checkpoint is served to both roles.
    proposer_summary, proposer_checkpoint = await train_proposer(
        ctx, _run(ctx), state, state["policy"]
    )
    solver_summary, policy = await train_solver(
        ctx, _run(ctx), state, solver_start(state["policy"], proposer_checkpoint)
    )
    if policy is None and proposer_checkpoint is not None:
        served, policy = await serve_checkpoint(
            ctx, _run(ctx), proposer_checkpoint, state["policy"]
        )
        proposer_summary.update(served)
    summary = TrainingSummary(
        solver=solver_summary, proposer=proposer_summary, run_modes=run_modes(ctx)
    )
    update: dict[str, Any] = {"training": summary, "stage_seconds": _timed(state, "train", started)}
    # What each role is served from here on, read from the policy this node ends with (whichever
    # update published last): the progress line, the round report and the lineage name it.
    summary.served = served_checkpoints(ctx, policy or state["policy"])
    if policy is not None:
        update["policy"] = policy
        await asyncio.to_thread(
            _run(ctx).add_lineage, {"round": state["round"], "served": summary.served}
        )
    return update


async def refresh(
    state: FlywheelState, runtime: Runtime[FlywheelContext]
) -> Command[Literal["inspect", "__end__"]]:
    """The current policy re-measures the pool; tasks out of the band retire; the round is
    reported. After the last round, a policy server the graph started stops."""
    ctx = await _serving(runtime, state["policy"])
    started = time.monotonic()
    run = _run(ctx)
    pool = Pool(run.pool)
    policy = state["policy"]
    round_ = state["round"]
    # refresh_attempts 0: the pool is not re-measured (the `learn` preset: its measure is the
    # held-out evaluation below), so nothing is recorded or retired.
    entries = (
        refresh_window(pool.entries("active"), round_, ctx.refresh_limit)
        if ctx.refresh_attempts > 0
        else []
    )
    attempt = attempter(ctx, run, state["run_id"], round_, policy, solver_graph)
    unmeasured: list[str] = []
    undecided: dict[str, BandDecision] = {}  # out of the band by the mean alone: kept

    async def measure(entry: PoolEntry) -> None:
        results = await asyncio.gather(
            *(
                attempt(pool.path(entry.task_id), i, {"purpose": "refresh"})
                for i in range(ctx.refresh_attempts)
            )
        )
        rewards = [r for r in results if r is not None]
        if len(rewards) < min_valid(ctx.refresh_attempts):
            # Too few attempts reached a verdict: the task stays exactly as it was.
            unmeasured.append(entry.task_id)
            return
        pool.record_eval(entry.task_id, round_, rewards)
        # Retired only when its whole 95% interval lies outside the band (tools/stats.py).
        decision = band_decision(rewards, (ctx.band_low, ctx.band_high))
        if decision.retire:
            pool.retire(entry.task_id, round_, decision.reason())
        elif decision.pending:  # out of the band by its mean, not by its interval: kept
            undecided[entry.task_id] = decision

    # Every task at once: `concurrency` bounds the trials in flight, not one task after another.
    await asyncio.gather(*(measure(entry) for entry in entries))
    notes: list[str] = []
    if unmeasured:
        notes.append(
            f"{len(unmeasured)} pool task(s) kept unmeasured this round: too few solver attempts "
            f"finished without an infrastructure failure ({', '.join(sorted(unmeasured))})"
        )
    if undecided:
        notes.append(
            f"{len(undecided)} pool task(s) measured but undecided, kept: out of the band by "
            "their mean, not by their 95% interval ("
            + "; ".join(f"{task}: {d.reason()}" for task, d in sorted(undecided.items()))
            + ")"
        )
    stage_seconds = _timed(state, "refresh", started)
    # After the round: the policy it served (trained this round) on the held-out split.
    heldout_started = time.monotonic()
    await evaluate_heldout(ctx, run, state["run_id"], round_, policy, solver_graph)
    stage_seconds["heldout"] = round(time.monotonic() - heldout_started, 2)
    heldout_started = time.monotonic()
    proposer_point = await proposer_heldout_point(ctx, run, state["run_id"], round_, policy)
    stage_seconds["proposer_heldout"] = round(time.monotonic() - heldout_started, 2)
    stage_seconds["round_total"] = round(time.time() - state.get("round_started", time.time()), 2)
    training = state.get("training")
    if not ctx.train:
        notes.append("training was skipped (train=false): the policy is unchanged")
    records = [c for c in state.get("candidates", []) if c.round == round_]
    metrics = round_metrics(
        round_,
        records,
        run.store,
        pool,
        state["run_id"],
        prices=PriceTable(prices={role_model(ctx, policy, "proposer").model: ctx.price_per_mtok}),
        proposer_model=role_model(ctx, policy, "proposer").model,
        training=training.report() if training else {},
        stage_seconds=stage_seconds,
        policy=f"{policy.model} ({policy.version})",
        heldout_split=ctx.heldout_dir or "",
        heldout_samples=ctx.heldout_samples,
    )
    metrics.notes += notes
    metrics.pool_undecided = {task: d.rate.n for task, d in sorted(undecided.items())}
    metrics.served = served_checkpoints(ctx, policy)
    metrics.decontamination = decontamination_status(ctx)
    metrics.heldout_configured = bool(ctx.heldout_dir) and ctx.heldout_samples > 0
    metrics.proposer_heldout = proposer_point
    if round_ == 1:
        metrics.proposer_heldout_before = load_point(run, 0)
    splits = await asyncio.to_thread(run_splits, ctx)
    metrics.splits = splits.summary()
    if not splits.disjoint:
        metrics.warnings.append(
            f"the run's splits share tasks ({splits.summary()}): a held-out number on them "
            "measures tasks the policy was trained or measured on"
        )
    if state.get("brief") is not None:
        metrics.brief_evidence = state["brief"].evidence().model_dump()
    history = [m for m in load_history(run.reports) if m.round != round_] + [metrics]
    save_history(run.reports, history)
    embedded = ctx.policy_server == "embedded"
    links = [candidate_links(r, run.root, run.reports) for r in records]
    (run.reports / f"round-{round_:02d}.md").write_text(
        round_markdown(metrics, embedded=embedded) + "\n" + links_markdown(links)
    )
    update: dict[str, Any] = {
        "metrics": [metrics],
        "round": round_ + 1,
        "stage_seconds": {},
        "training": None,
    }
    if round_ >= _rounds(state, ctx):
        await release_embedded_default(runtime.context or _NO_CONTEXT)
        return Command(goto=END, update=update)
    return Command(goto="inspect", update=update)
