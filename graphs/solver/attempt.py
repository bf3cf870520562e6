"""One solver attempt: its settings, a Harbor trial of `SolverAgent`, the attempt's outcome and its
rows in the rollout store.

    autoenvscaling solve TASK... --model openai:policy --attempts 4 --json
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, field_validator

from ...tools.agents.solver_interface import OUTPUT_CHARS, SOLVER_MAX_TURNS
from ...tools.rollouts.kept import kept_store
from ...tools.rollouts.models import Outcome, stable_attempt_id
from ...tools.rollouts.store import RolloutStore
from ...tools.tasks.domains import needs_desktop
from ...tools.tasks.format import TaskFormatError, load_task
from ...tools.trials.faults import Fault, trial_failure
from ...tools.trials.trial import TrialBackend, TrialOutcome, run_trial
from ..agent.loop import LoopBudget
from ..models import ModelConfig

#: Our solver as a Harbor agent (graphs/solver/harbor_agent.py; it attaches to the sandbox it runs in). Past
#: trial configs name this path: it stays. The gate gets it as GateConfig.solver_agent.
SOLVER_AGENT = "autoenvscaling.graphs.solver:SolverAgent"


class SolverSettings(BaseModel):
    """Everything one solver attempt needs; JSON, because Harbor passes it as agent kwargs."""

    model: ModelConfig = Field(default_factory=ModelConfig)
    budget: LoopBudget = Field(default_factory=lambda: LoopBudget(max_turns=SOLVER_MAX_TURNS))
    store_path: str | None = Field(default=None, description="Rollout store; None records nothing")
    run_id: str = ""
    round: int = 0
    policy_version: str = "base"
    attempt_id: str | None = None
    task_id: str = ""
    category: str = ""
    tags: dict[str, Any] = Field(default_factory=dict, description="Extra rollout metadata")
    tool_output_chars: int = Field(
        default=OUTPUT_CHARS, ge=1, description="Cap on one terminal result shown to the model"
    )
    system_prompt: str = Field(
        default="solver", description="Prompt file (prompts/<name>.md) to use"
    )
    desktop_tools: bool | None = Field(
        default=None,
        description="Bind the desktop tools (screenshot, key, type_text, click) beside the "
        "terminal's; None: only for a task whose domain is computer-use.",
    )

    @field_validator("budget", mode="before")
    @classmethod
    def _solver_turn_limit(cls, value: Any) -> Any:
        """A budget given without a turn limit (JSON kwargs) gets the solver's, not the generic
        agent loop's: one default for the solver's turns (SOLVER_MAX_TURNS)."""
        if isinstance(value, dict) and "max_turns" not in value:
            return {**value, "max_turns": SOLVER_MAX_TURNS}
        return value


class SolverAttempt(BaseModel):
    task: str
    reward: float | None
    steps: int = Field(description="Number of tool calls the solver made")
    rollout_id: str
    outcome: Outcome
    fault: Fault | None = Field(
        default=None, description="Why an `error` outcome has no reward (tools/trials/faults.py)"
    )
    stop_reason: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    model_retries: int = 0
    duration_sec: float = 0.0


def record_start(store: RolloutStore, s: SolverSettings, meta: dict[str, Any] | None = None) -> str:
    """The attempt's row (a second start is a no-op); returns its id. The agent writes it with its
    steps, `solve_task` again once the trial is over."""
    return store.start_attempt(
        id=s.attempt_id,
        task_id=s.task_id,
        role="solver",
        run_id=s.run_id,
        round=s.round,
        category=s.category,
        policy_version=s.policy_version,
        metadata=meta,
    )


def outcome_of(trial: TrialOutcome) -> Outcome:
    """`error` when the attempt has no reward the policy earned (tools/trials/faults.py): an
    infrastructure failure (the model call after its retries, the sandbox, the verifier's run)
    or the task's fault (no reward written, a build that fails): it says nothing about the
    policy, and the rollout's `fault` metadata says which. A policy past its own limits is
    scored: `timeout` past its agent time, `failed` past the writable-layer cap."""
    if trial_failure(trial, actor="policy") is not None:
        return "error"
    timed_out = (trial.error or "").startswith("AgentTimeoutError")
    if timed_out or trial.agent_metadata.get("stop_reason") == "time_budget":
        return "timeout"
    return "solved" if (trial.reward or 0.0) >= 1.0 else "failed"


def attempt_id_for(settings: SolverSettings, task_dir: Path, sample: int) -> str:
    """The id `solve_task` records an attempt under: the settings' own, else one derived from
    the run, round, task, policy version and sample (a resumed run computes it again)."""
    return settings.attempt_id or stable_attempt_id(
        settings.run_id,
        settings.round,
        "solver",
        Path(task_dir).resolve().name,
        settings.policy_version,
        sample,
    )


def task_facts(task_dir: Path) -> tuple[str, bool]:
    """A task folder's category ("" when the folder is not a valid task) and whether its solver
    gets the desktop tools; remembered while task.toml and the folder's listing are unchanged
    (every attempt of a task would otherwise parse and check the folder again, ~4 ms on the
    event loop)."""
    stamps = []
    for path in (task_dir, task_dir / "task.toml"):
        try:
            info = path.stat()
            stamps += [info.st_ino, info.st_mtime_ns, info.st_size]
        except OSError:
            stamps += [0, 0, 0]
    return _task_facts(task_dir, tuple(stamps))


@functools.lru_cache(maxsize=4096)
def _task_facts(task_dir: Path, _stamps: tuple[int, ...]) -> tuple[str, bool]:

    try:
        category = load_task(task_dir).category or ""
    except TaskFormatError:
        category = ""
    return category, needs_desktop(task_dir)


async def solve_task(
    task_dir: Path,
    settings: SolverSettings,
    *,
    sample: int = 0,
    backend: TrialBackend = "podman",
    trials_dir: Path | None = None,
) -> SolverAttempt:
    """One solver attempt in a real Harbor trial; recorded and rewarded in the store."""
    task_dir = Path(task_dir).resolve()
    category, desktop = task_facts(task_dir)
    attempt_id = attempt_id_for(settings, task_dir, sample)
    update: dict[str, Any] = {
        "attempt_id": attempt_id,
        "task_id": task_dir.name,
        "category": category,
    }
    if settings.desktop_tools is None:
        update["desktop_tools"] = desktop  # what the agent would read again from task.toml
    settings = settings.model_copy(update=update)
    trial = await run_trial(
        task_dir,
        agent=SOLVER_AGENT,
        backend=backend,
        trials_dir=trials_dir,
        agent_kwargs={"settings": settings.model_dump(mode="json")},
    )
    meta = trial.agent_metadata
    outcome = outcome_of(trial)
    fault = trial_failure(trial, actor="policy")
    error = meta.get("error") or trial.error
    # A fault scores nothing: an infrastructure failure's verifier judged an untouched
    # workspace, and a task fault's verifier gave no reward the policy earned. A policy past
    # its own limit (agent time, the writable-layer cap) with no reward scores 0.
    reward = None if fault else (trial.reward or 0.0)
    if settings.store_path:

        def finish(store: RolloutStore) -> None:
            record_start(store, settings)  # the agent may have died before recording it
            store.finish_attempt(
                attempt_id,
                reward=reward,
                outcome=outcome,
                error=error,
                prompt_tokens=meta.get("prompt_tokens"),
                completion_tokens=meta.get("completion_tokens"),
                duration_sec=trial.duration_sec,
                metadata={
                    **settings.tags,
                    "trial_dir": trial.trial_dir,
                    "stop_reason": meta.get("stop_reason"),
                    "model_turns": int(meta.get("turns") or 0),
                    "model_retries": int(meta.get("model_retries", 0)),
                    "retry_errors": meta.get("retry_errors", []),
                    "backend": backend,
                    "fault": fault.fault if fault else None,  # task or infrastructure
                    "model": settings.model.model,  # which model answered
                    "verifier_output": trial.verifier_output[-1500:],
                },
            )

        # The process's kept store, off the event loop (tools/rollouts/kept.py).
        await kept_store(settings.store_path).call(finish)
    return SolverAttempt(
        task=str(task_dir),
        reward=reward,
        steps=int(meta.get("steps", 0)),
        rollout_id=attempt_id,
        outcome=outcome,
        fault=fault.fault if fault else None,
        stop_reason=meta.get("stop_reason"),
        error=error,
        prompt_tokens=int(meta.get("prompt_tokens", 0)),
        completion_tokens=int(meta.get("completion_tokens", 0)),
        model_retries=int(meta.get("model_retries", 0)),
        duration_sec=trial.duration_sec,
    )
