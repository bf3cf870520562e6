"""The served proposer on briefs it never trained on (issue 40, item 3).

A held-out brief is the run's own brief built on a folder of tasks the proposer never sees in
training: its pool table and example tasks come from `proposer_heldout_dir` (by default the
run's held-out split), with no rollout evidence, each with its own examples (`variant`) and
focus. The proposer serves each brief `proposer_heldout_samples` times through its own attempt
graph, with the run's arm, turns and gate (every stage the proposer's own gate runs), and no
revision: the point measures what the policy writes, not what a repair loop rescues. The
attempts are recorded in their own store (`heldout-proposer/rollouts.db`), so no proposer
update, brief or report of the run reads them as training data.

Before round 1 and after every round; a round that left the proposer's checkpoint as it was
reuses the last point's samples (it is the same policy; serving it again costs minutes and
measures only noise) and says so. Idempotent per point: a resumed run reads the saved one.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...tools.agents.brief import build_brief
from ...tools.files.whole import write_whole
from ...tools.report.proposer_heldout import ProposerHeldoutEval, ProposerHeldoutSample
from ...tools.tasks.splits import task_folders
from ...tools.tasks.task_files import written_task_files
from ..proposer.record import propose
from ..proposer.settings import ProposerSettings, proposer_budget
from .admission import proposer_gate

if TYPE_CHECKING:
    from ...tools.agents.brief import ProposerBrief
    from ...tools.run_dir import RunDir
    from ..config import FlywheelContext
    from ..models import ModelConfig, Policy
    from ..proposer.settings import ProposerSettings

#: Where a run keeps the evaluation: one JSON a point, the candidates, the attempts' store.
FOLDER = "heldout-proposer"


def heldout_folder(ctx: FlywheelContext) -> str | None:
    """The folder the held-out briefs are built on; None: the evaluation is off."""
    if ctx.proposer_heldout_briefs <= 0 or ctx.proposer_heldout_samples <= 0:
        return None
    folder = ctx.proposer_heldout_dir or ctx.heldout_dir
    return folder if folder and task_folders(folder) else None


def heldout_briefs(ctx: FlywheelContext, folder: str) -> list[ProposerBrief]:
    """The held-out briefs: the run's brief settings on `folder`, one set of examples each."""

    n = ctx.proposer_heldout_briefs
    return [
        build_brief(
            None,
            folder,
            round=1,  # one prompt a brief at every point: only the policy changes
            n_examples=ctx.brief_examples,
            max_file_chars=ctx.brief_file_chars,
            variant=i,
            band=(ctx.band_low, ctx.band_high),
        ).for_slot(i, n)
        for i in range(n)
    ]


def point_path(run: RunDir, round_: int) -> Path:
    return run.root / FOLDER / f"round-{round_:02d}.json"


def load_point(run: RunDir, round_: int) -> ProposerHeldoutEval | None:
    path = point_path(run, round_)
    return ProposerHeldoutEval.model_validate_json(path.read_text()) if path.is_file() else None


def _previous(run: RunDir, round_: int) -> tuple[int, ProposerHeldoutEval] | None:
    for earlier in range(round_ - 1, -1, -1):
        point = load_point(run, earlier)
        if point is not None:
            return earlier, point
    return None


async def evaluate_proposer_heldout(
    ctx: FlywheelContext,
    run: RunDir,
    run_id: str,
    round_: int,
    policy: Policy,
    model: ModelConfig,
    graph: Any = None,
) -> ProposerHeldoutEval | None:
    """The point after round `round_` (0: before round 1) of the served proposer (`model`, the
    shared `policy`'s proposer config); None when the evaluation is off."""
    folder = heldout_folder(ctx)
    if folder is None:
        return None
    saved = load_point(run, round_)
    if saved is not None:
        return saved
    when = "before round 1" if round_ == 0 else f"after round {round_}"
    checkpoint = policy.checkpoint_id or "base"
    previous = _previous(run, round_)
    if previous is not None and previous[1].checkpoint == checkpoint:
        earlier, point = previous
        reused = point.reused_from or (
            "before round 1" if earlier == 0 else f"after round {earlier}"
        )
        result = point.model_copy(update={"when": when, "reused_from": reused})
    else:
        settings = heldout_settings(ctx, run, run_id, round_, policy, model)
        briefs = await asyncio.to_thread(heldout_briefs, ctx, folder)
        out_dir = run.root / FOLDER / f"r{round_:02d}"
        samples = ctx.proposer_heldout_samples
        rows = await _serve(briefs, settings, out_dir, samples, ctx.concurrency, graph)
        result = ProposerHeldoutEval(
            when=when,
            split=folder,
            checkpoint=checkpoint,
            briefs=ctx.proposer_heldout_briefs,
            samples_per_brief=ctx.proposer_heldout_samples,
            rows=rows,
        )
    path = point_path(run, round_)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Whole or absent: a run killed mid-write resumes by serving the point again, never by
    # reading half of one.
    write_whole(path, result.model_dump_json(indent=2))
    return result


def heldout_settings(
    ctx: FlywheelContext,
    run: RunDir,
    run_id: str,
    round_: int,
    policy: Policy,
    model: ModelConfig,
) -> ProposerSettings:
    """The run's proposer settings for a held-out point: its arm, turns and gate, no revision, no
    rollout evidence, recorded in the point's own store."""

    root = run.root / FOLDER
    root.mkdir(parents=True, exist_ok=True)
    return ProposerSettings(
        model=model,
        arm=ctx.arm,  # pyright: ignore[reportArgumentType] - a str option; pydantic checks it
        solver_feedback=False,  # a held-out brief has no rollout evidence to cite
        budget=proposer_budget(ctx.proposer_max_turns),
        max_revisions=0,
        compact_prompt=ctx.proposer_compact_prompt,
        gate=proposer_gate(ctx, run),
        store_path=str(root / "rollouts.db"),
        run_id=f"{run_id}-proposer-heldout",
        round=round_,
        policy_version=policy.version,
    )


async def _serve(
    briefs: list[ProposerBrief],
    settings: ProposerSettings,
    out_dir: Path,
    samples: int,
    concurrency: int,
    graph: Any,
) -> list[ProposerHeldoutSample]:
    """Each brief `samples` times, `concurrency` attempts at once."""

    slots = asyncio.Semaphore(max(1, concurrency))

    async def one(index: int, brief: ProposerBrief) -> ProposerHeldoutSample:
        b, sample = divmod(index, samples)
        async with slots:
            started = time.monotonic()
            result = await propose(brief, settings, out_dir=out_dir, index=index, graph=graph)
        verdict = result.verdict
        infra = bool(verdict and verdict.infrastructure_error) or (
            result.outcome == "error" and verdict is None
        )
        stage = (
            verdict.stage
            if verdict
            else ("error" if result.outcome == "error" else "not_submitted")
        )
        return ProposerHeldoutSample(
            brief=b,
            sample=sample,
            attempt_id=result.attempt_id,
            examples=[e.name for e in brief.examples],
            submitted=result.submitted,
            autosubmitted=result.autosubmitted,
            stage=stage,
            gate_reward=result.reward,
            files_written=len(written_task_files(result.candidate)),
            infrastructure_error=infra,
            seconds=round(time.monotonic() - started, 1),
        )

    return list(
        await asyncio.gather(
            *(one(b * samples + s, brief) for b, brief in enumerate(briefs) for s in range(samples))
        )
    )
