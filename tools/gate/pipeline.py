"""The gate's stage sequence, in one place: `STAGE_FUNCTIONS` (which stages, in which order) and
`next_stage` (what stops the sequence). Two runners walk it: `validate_task` here (the proposer's
`check` tool), and the validation graph (graphs/validation/builder.py, one node per stage, the CLI's
and the flywheel's), whose nodes call `run_stage` and route by `next_stage`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path

from ..tasks.snapshot import content_hash
from .anti_cheat.stage import anti_cheat
from .calibrate import calibrate
from .config import STAGES, GateConfig, StageName
from .decontam import decontam
from .kinds import missing_for
from .results import (
    REWARD_VALIDATION_FAILED,
    StageResult,
    Verdict,
    make_verdict,
)
from .static_stages import dedup, lint
from .trial_stages import build, nop, oracle, repeat

StageFn = Callable[[Path, GateConfig, Mapping[StageName, StageResult]], Awaitable[StageResult]]

STAGE_FUNCTIONS: dict[StageName, StageFn] = {
    # Static checks: format, Dockerfile subset, no tests/solution in the image, reward file,
    # every checked path named in the instruction, pinned dependencies.
    "lint": lint,
    "build": build,  # the environment builds within its build timeout
    "oracle": oracle,  # the reference solution scores exactly 1.0
    "nop": nop,  # an empty attempt scores below the threshold
    "repeat": repeat,  # n more oracle runs give the same reward (no flaky verifier)
    # The gate hacks the task: no answer readable at the start, wrong answers fail, exploit
    # probes and the optional cheat agent score below the threshold (sub-results per probe).
    "anti_cheat": anti_cheat,
    # No 13-gram shared with held-out benchmark instructions; "not configured" (never passed)
    # when no benchmark was given.
    "decontam": decontam,
    "calibrate": calibrate,  # the solver's mean reward lies in the band, and its rewards vary
    "dedup": dedup,  # not a near-duplicate of a task already in the pool
}
assert tuple(STAGE_FUNCTIONS) == STAGES


def next_stage(stage: StageName, result: StageResult) -> StageName | None:
    """The stage to run after `stage` gave `result`; None when the gate is done: at the first
    failure, or after the last stage."""
    later = STAGES[STAGES.index(stage) + 1 :]
    return later[0] if result.passed and later else None


async def run_stage(
    stage: StageName,
    task: Path | str,
    config: GateConfig,
    prior: Mapping[StageName, StageResult] | None = None,
) -> StageResult:
    """One stage on one task. Never raises: a crash is an infrastructure result, not a verdict
    on the task."""
    if stage in config.skip:
        return StageResult.skip(stage, "skipped on request")
    started = time.monotonic()
    try:
        result = await STAGE_FUNCTIONS[stage](Path(task).resolve(), config, prior or {})
    except Exception as exc:  # noqa: BLE001 - reported, and one task never stops a batch
        result = StageResult.infrastructure(
            stage, f"the {stage} stage crashed: {type(exc).__name__}: {exc}"
        )
    if not result.passed and not result.infrastructure_error:
        try:  # whose "no": what this machine lacks, if that is why the stage failed
            missing = await missing_for(
                stage,
                Path(task).resolve(),
                result.details,
                backend=config.backend,
                allow_internet=config.allow_internet,
            )
        except Exception:  # noqa: BLE001 - the stage's own verdict stands
            missing = []
        result = result.model_copy(update={"missing": missing})
    return result.model_copy(update={"duration_sec": round(time.monotonic() - started, 3)})


async def validate_task(
    task_dir: Path | str,
    config: GateConfig | None = None,
    *,
    skip: Iterable[str] = ("calibrate",),
    on_stage: Callable[[StageResult], None] | None = None,
) -> Verdict:
    """Every stage in order, stopping at the first failure, then the verdict.

    `skip` is added to `config.skip`; it defaults to calibrate, the stage a proposer cannot run
    against itself while it builds (pass `skip=()` for the full gate).
    """
    config = (config or GateConfig()).with_skip(*skip)
    task = Path(task_dir).resolve()
    checked = content_hash(task) if task.is_dir() else None
    results: dict[StageName, StageResult] = {}
    stage: StageName | None = STAGES[0]
    while stage is not None:
        results[stage] = result = await run_stage(stage, task, config, results)
        if on_stage is not None:
            on_stage(result)
        stage = next_stage(stage, result)
    verdict = make_verdict(task, list(results.values()), backend=config.backend)
    return sealed(verdict, checked, task)


def sealed(verdict: Verdict, checked: str | None, task: Path) -> Verdict:
    """The verdict bound to the bytes it judged: `checked` (the folder's hash before the first
    stage) and the hash of `task` now must agree, else nothing checked can be admitted."""
    after = content_hash(task) if task.is_dir() else None
    if checked != after:
        # The folder changed under the gate: the stages judged a mix of versions.
        return verdict.model_copy(
            update={
                "admitted": False,
                "proposer_reward": REWARD_VALIDATION_FAILED,
                "content_hash": after,
                "reason": "the task folder changed while the gate checked it "
                f"({checked} before, {after} after): nothing checked can be admitted; "
                "do not modify the task after you submit it",
            }
        )
    return verdict.model_copy(update={"content_hash": checked})
