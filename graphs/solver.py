"""The solver role: a terminal agent that works inside a real Harbor trial.

`SolverAgent` is a Harbor custom agent, so Harbor builds the sandbox, hides the tests, runs the
verifier and reads the reward; the agent only sees the instruction and an MCP terminal attached to
the trial's live sandbox. Each attempt is written to the rollout store with its steps, then given
its reward and outcome by `solve_tasks` once Harbor has verified it.

    autoenvscaling solve TASK... --model openai:policy --attempts 4 --json
"""

from __future__ import annotations

import functools
import operator
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict, override

from harbor.agents.base import BaseAgent
from harbor.environments.base import BaseEnvironment
from harbor.models.agent.context import AgentContext
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict, Field, field_validator

from autoenvscaling.graphs.agent_loop import LoopBudget, build_agent_loop, steps_from_messages
from autoenvscaling.graphs.config import from_run
from autoenvscaling.graphs.mcp_tools import open_mcp_tools
from autoenvscaling.graphs.models import ModelConfig, load_chat_model
from autoenvscaling.mcp_servers.terminal import build_terminal_server
from autoenvscaling.prompts import load_prompt
from autoenvscaling.tools.agents.prompt_fit import prompt_tokens, reply_cap
from autoenvscaling.tools.agents.solver_interface import (
    OUTPUT_CHARS,
    SOLVER_MAX_TURNS,
    first_messages,
    openai_tools,
    render_mcp_result,
)
from autoenvscaling.tools.rollouts.models import Outcome, new_attempt_id, stable_attempt_id
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.trials.faults import Fault, trial_failure
from autoenvscaling.tools.trials.trial import TrialBackend, TrialOutcome, run_trial

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


class SolverAgent(BaseAgent):
    """Harbor agent: the LangGraph tool loop over an MCP terminal attached to the trial's sandbox."""

    def __init__(self, *args: Any, settings: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.settings = SolverSettings.model_validate(settings or {})

    @staticmethod
    @override
    def name() -> str:
        return "autoenvscaling-solver"

    @override
    def version(self) -> str:
        return "1"

    @override
    async def setup(self, environment: BaseEnvironment) -> None:
        return None

    @override
    async def run(
        self, instruction: str, environment: BaseEnvironment, context: AgentContext
    ) -> None:
        s = self.settings
        ref = environment.sandbox_ref  # type: ignore[attr-defined]  # our SandboxEnvironment
        started = time.monotonic()
        server = build_terminal_server(ref=ref)
        # The one solver interface (tools/agents/solver_interface.py): GRPO episodes start the same way.
        # Only the cheat agent (anti_cheat) swaps the system prompt.
        system, user = first_messages(instruction)
        if s.system_prompt != "solver":
            system = {"content": load_prompt(s.system_prompt)}
        messages = [SystemMessage(system["content"]), HumanMessage(user["content"])]
        model = solver_model_for(s.model, system["content"], user["content"])
        async with open_mcp_tools({"terminal": server}) as tools:
            loop = build_agent_loop(
                load_chat_model(model),
                tools,
                s.budget,
                name="solver",
                tool_choice=s.model.tool_choice,
                schemas=openai_tools(),
                present=functools.partial(render_mcp_result, cap=s.tool_output_chars),
            )
            state = await loop.ainvoke(
                {"messages": messages, "started_at": time.monotonic()},
                {"recursion_limit": 4 * s.budget.max_turns + 10},
                durability="exit",  # no checkpointer; see graphs/proposer/episode.py
            )
        steps = steps_from_messages(state["messages"], state.get("tool_seconds", {}))
        tool_steps = sum(1 for step in steps if step.tool_name)
        if s.store_path and not s.attempt_id:
            # A trial someone else runs (the gate's calibration): a fresh id, reported back
            # in the trial's metadata so the caller can give the attempt its reward.
            s = s.model_copy(update={"attempt_id": new_attempt_id()})
        if s.store_path and s.attempt_id:
            with RolloutStore(s.store_path) as store:
                store.start_attempt(
                    id=s.attempt_id,
                    task_id=s.task_id
                    or Path(str(getattr(environment, "environment_dir", ""))).parent.name,
                    role="solver",
                    run_id=s.run_id,
                    round=s.round,
                    category=s.category,
                    policy_version=s.policy_version,
                    # Known here for every attempt, the gate's calibration trials included
                    # (their rows are finished elsewhere): the round report counts them.
                    metadata={
                        **s.tags,
                        "stop_reason": state.get("stop_reason"),
                        "model_turns": state.get("turns", 0),
                    },
                )
                for step in steps:
                    store.add_step(
                        s.attempt_id, step.index, **step.model_dump(exclude={"attempt_id", "index"})
                    )
        context.n_input_tokens = state.get("prompt_tokens", 0)
        context.n_output_tokens = state.get("completion_tokens", 0)
        context.metadata = {
            **(context.metadata or {}),
            "attempt_id": s.attempt_id,
            "steps": tool_steps,
            "turns": state.get("turns", 0),
            "stop_reason": state.get("stop_reason"),
            "error": state.get("error"),
            "prompt_tokens": state.get("prompt_tokens", 0),
            "completion_tokens": state.get("completion_tokens", 0),
            "model_retries": state.get("model_retries", 0),
            "retry_errors": state.get("retry_errors", []),
            "agent_seconds": round(time.monotonic() - started, 3),
        }


def solver_model_for(model: ModelConfig, system: str, user: str) -> ModelConfig:
    """The solver's model with its reply cap within what a known context window leaves after
    the first prompt (~1.1k tokens with the tool schemas). The instruction is the task's and is
    never trimmed; one too long for the window leaves a 1-token reply and the attempt fails as
    the model's, not as an infrastructure error a task could provoke on purpose."""
    if model.context_window is None:
        return model
    needed = prompt_tokens([system, user], openai_tools())
    cap = reply_cap(needed, model.max_tokens, model.context_window)
    return model if cap == model.max_tokens else model.model_copy(update={"max_tokens": cap})


def outcome_of(trial: TrialOutcome) -> Outcome:
    """`error` when the attempt has no reward the policy earned (tools/trials/faults.py): an
    infrastructure failure (the model call after its retries, the sandbox, the verifier's run)
    or the task's fault (no reward written, a build that fails): it says nothing about the
    policy, and the rollout's `fault` metadata says which. A policy past its own limits is
    scored: `timeout` past its agent time, `failed` past the writable-layer cap."""
    meta = trial.agent_metadata
    if trial_failure(trial, actor="policy") is not None:
        return "error"
    timed_out = (trial.error or "").startswith("AgentTimeoutError")
    if timed_out or meta.get("stop_reason") == "time_budget":
        return "timeout"
    return "solved" if (trial.reward or 0.0) >= 1.0 else "failed"


async def solve_task(
    task_dir: Path,
    settings: SolverSettings,
    *,
    sample: int = 0,
    backend: TrialBackend = "podman",
    trials_dir: Path | None = None,
) -> SolverAttempt:
    """One solver attempt in a real Harbor trial; recorded and rewarded in the store."""
    from autoenvscaling.tools.tasks.format import TaskFormatError, load_task

    task_dir = Path(task_dir).resolve()
    try:
        category = load_task(task_dir).category or ""
    except TaskFormatError:
        category = ""
    attempt_id = settings.attempt_id or stable_attempt_id(
        settings.run_id, settings.round, "solver", task_dir.name, settings.policy_version, sample
    )
    settings = settings.model_copy(
        update={"attempt_id": attempt_id, "task_id": task_dir.name, "category": category}
    )
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
        with RolloutStore(settings.store_path) as store:
            # The agent may have died before recording: make sure the attempt exists.
            store.start_attempt(
                id=attempt_id,
                task_id=task_dir.name,
                role="solver",
                run_id=settings.run_id,
                round=settings.round,
                category=category,
                policy_version=settings.policy_version,
            )
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


# -- the Studio / langgraph.json face: attempt tasks k times each, fanned out with Send ----------


class SolverContext(BaseModel):
    """What Studio's form shows for the solver graph: a view of the run configuration
    (graphs/config.py) plus the standalone graph's own rollout store."""

    model_config = ConfigDict(extra="forbid")

    model: str = from_run("policy_model", description="init_chat_model string")
    base_url: str | None = from_run("policy_base_url", description="OpenAI-compatible endpoint")
    max_turns: int = from_run("solver_max_turns", description="Model calls per attempt")
    time_budget_sec: float = Field(default=900, description="Wall time per attempt")
    backend: str = from_run("backend")
    store_path: str | None = Field(default=None, description="Rollout store (SQLite)")
    policy_version: str = Field(default="base", description="Recorded with rollouts")


class SolveInput(TypedDict):
    tasks: list[str]
    attempts: int


class SolveRun(SolveInput, total=False):
    """What a caller with a run of its own adds (the flywheel's baseline and refresh): the full
    settings of every attempt (store, run id, round, tags), the first sample's index and the
    trials folder. Without them, the context's form fields decide."""

    settings: dict[str, Any]  # a SolverSettings, as JSON
    first_sample: int
    trials_dir: str | None


class SolveState(SolveRun, total=False):
    results: Annotated[list[dict[str, Any]], operator.add]


class _One(TypedDict):
    task: str
    sample: int
    settings: dict[str, Any] | None
    trials_dir: str | None


def _fan_out(state: SolveState) -> list[Send]:
    first = state.get("first_sample", 0)
    return [
        Send(
            "attempt",
            _One(
                task=t,
                sample=first + i,
                settings=state.get("settings"),
                trials_dir=state.get("trials_dir"),
            ),
        )
        for t in state["tasks"]
        for i in range(max(1, state.get("attempts", 1)))
    ]


async def _attempt(state: _One, runtime: Runtime[SolverContext]) -> dict[str, Any]:
    item = state  # one (task, sample), sent by _fan_out
    ctx = runtime.context or SolverContext()
    if item.get("settings"):
        settings = SolverSettings.model_validate(item["settings"])
    else:
        settings = SolverSettings(
            model=ModelConfig(model=ctx.model, base_url=ctx.base_url),
            budget=LoopBudget(max_turns=ctx.max_turns, time_budget_sec=ctx.time_budget_sec),
            store_path=ctx.store_path,
            policy_version=ctx.policy_version,
            run_id="studio",
        )
    trials_dir = item.get("trials_dir")
    result = await solve_task(
        Path(item["task"]),
        settings,
        sample=item["sample"],
        backend=ctx.backend,
        trials_dir=Path(trials_dir) if trials_dir else None,
    )
    return {"results": [result.model_dump(mode="json")]}


def build_solver_graph() -> Any:
    builder = StateGraph(SolveState, input_schema=SolveRun, context_schema=SolverContext)
    builder.add_node("attempt", _attempt)
    builder.add_conditional_edges(START, _fan_out, ["attempt"])
    builder.add_edge("attempt", END)
    return builder.compile(name="solver")


graph = build_solver_graph()
