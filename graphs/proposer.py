"""The proposer role: an agent that writes a Harbor task, proves it runs and submits it to the gate.

Three generation arms, as configuration (the paper's comparison):
- `terminal`: a tool loop in its own workspace sandbox with the task folder bound in, over MCP
  tools only — terminal, filesystem (the folder on the host), rollout reader, and the gate's
  `check` / `submit`. It ends at `submit` or at its budget.
- `error_feedback`: no tools; the model writes every file in one reply (`<file path>` blocks),
  then reads the gate's rejection and rewrites.
- `prompt_only`: one reply, no feedback.
After a submission the full gate (`tools.gate.validate_task`, with calibration when a solver is
configured) decides; a rejection opens a revision with the gate's stage, reason and excerpt in
context, up to `max_revisions`. `solver_feedback=False` removes the rollout evidence from the brief
(and the rollout reader from the tools). Each attempt is one rollout (role "proposer") whose reward
is the gate's proposer reward: +1 admitted, -0.25 failed calibration, -1 rejected or unsubmitted.

    autoenvscaling propose --n 2 --model openai:policy --base-url http://localhost:8000/v1
"""

from __future__ import annotations

import asyncio
import operator
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from pydantic import BaseModel, ConfigDict, Field

from autoenvscaling.graphs.agent_loop import LoopBudget, build_agent_loop, steps_from_messages
from autoenvscaling.graphs.config import from_run
from autoenvscaling.graphs.mcp_tools import open_mcp_tools
from autoenvscaling.graphs.models import ModelConfig, load_chat_model
from autoenvscaling.mcp_servers.filesystem import build_filesystem_server
from autoenvscaling.mcp_servers.gate import build_gate_server
from autoenvscaling.mcp_servers.rollouts import build_rollouts_server
from autoenvscaling.mcp_servers.terminal import ShellOpener, build_terminal_server
from autoenvscaling.prompts import load_prompt
from autoenvscaling.tools.agents.brief import TRIM_LEVELS, ProposerBrief, build_brief
from autoenvscaling.tools.agents.prompt_fit import (
    prompt_tokens,
    reply_cap,
    reply_reserve,
    too_large,
)
from autoenvscaling.tools.gate import REWARD_VALIDATION_FAILED, GateConfig, Verdict, validate_task
from autoenvscaling.tools.rollouts.models import Attempt, Outcome, new_attempt_id, stable_attempt_id
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.rollouts.transcripts import Transcript, chat_messages, save_transcript
from autoenvscaling.tools.sandbox import PersistentShell, SandboxLimits
from autoenvscaling.tools.tasks.file_blocks import ReplyFormatError, parse_file_blocks
from autoenvscaling.tools.tasks.format import TaskFormatError, load_task, write_task
from autoenvscaling.tools.trials.verifier import default_to_separate

Arm = Literal["terminal", "error_feedback", "prompt_only"]
ARMS: tuple[Arm, ...] = ("terminal", "error_feedback", "prompt_only")
TASK_MOUNT = "/workspace/task"
"""Where the candidate folder appears inside the proposer's workspace sandbox."""


class ProposerSettings(BaseModel):
    """Everything one proposer attempt needs."""

    model: ModelConfig = Field(
        default_factory=lambda: ModelConfig(max_tokens=8192),
        description="The proposer's model; one-reply arms need room for a whole task per reply.",
    )
    arm: Arm = "terminal"
    solver_feedback: bool = Field(
        default=True, description="False: no rollout evidence in the brief."
    )
    budget: LoopBudget = Field(
        default_factory=lambda: LoopBudget(
            max_turns=40, max_total_tokens=400_000, time_budget_sec=1800
        ),
        description="Per episode (the first submission and each revision).",
    )
    max_revisions: int = Field(default=2, ge=0, description="Revisions after a rejection.")
    gate: GateConfig = Field(
        default_factory=GateConfig,
        description="The full gate after submit; `check` runs the same minus calibrate. "
        "calibrate runs only when gate.solver is set.",
    )
    store_path: str | None = Field(default=None, description="Rollout store; None records nothing")
    run_id: str = ""
    round: int = 0
    policy_version: str = "base"
    attempt_id: str | None = None
    workspace_limits: SandboxLimits = Field(
        default_factory=lambda: SandboxLimits(memory_mb=2048, pids=512)
    )


class GateRun(BaseModel):
    """One verdict of the attempt, compact (the last one is in `ProposalResult.verdict`)."""

    revision: int
    admitted: bool
    stage: str | None
    reason: str
    proposer_reward: float | None


class ProposalResult(BaseModel):
    attempt_id: str
    candidate: str = Field(description="The candidate task folder.")
    arm: Arm
    solver_feedback: bool
    admitted: bool = False
    reward: float | None = Field(description="The gate's proposer reward; None on an error.")
    outcome: Outcome
    revisions: int = Field(default=0, description="Revisions used after the first rejection.")
    verdict: Verdict | None = Field(default=None, description="The last full-gate verdict.")
    gates: list[GateRun] = Field(default_factory=list)
    submitted: bool = False
    stop_reason: str | None = None
    error: str | None = None
    turns: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_sec: float = 0.0


class _Episode(BaseModel):
    stop_reason: str | None = None
    error: str | None = None
    format_error: str | None = None
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def submitted(self) -> bool:
        return self.stop_reason == "submitted"


# -- prompts ---------------------------------------------------------------------------------------


def system_prompt(arm: Arm, band: tuple[float, float], *, compact: bool = False) -> str:
    """The arm's system prompt; `compact`: the short variant for small context windows."""
    if compact:
        return load_prompt(f"proposer_{arm}_compact").format(
            band_low=f"{band[0]:g}", band_high=f"{band[1]:g}"
        )
    rules = load_prompt("proposer_rules").format(band_low=f"{band[0]:g}", band_high=f"{band[1]:g}")
    return load_prompt(f"proposer_{arm}").format(
        rules=rules, files_format=load_prompt("proposer_files_format")
    )


def brief_prompt(brief: ProposerBrief) -> str:
    sections = brief.sections()
    evidence = ""
    if brief.solver_feedback:
        evidence = load_prompt("proposer_evidence").format(
            policy_version=brief.policy_version or "current", **sections
        )
    text = load_prompt("proposer_brief").format(
        round=brief.round,
        pool_size=brief.pool_size,
        pool=sections["pool"],
        evidence=evidence,
        examples=sections["examples"] or "(none)",
    )
    if brief.focus:
        text += "\n" + load_prompt("proposer_focus").format(focus=brief.focus)
    return text


class FittedPrompt(BaseModel):
    """The first prompt as sent: what was trimmed to fit the window, and the reply's cap."""

    system: str
    brief: str
    trim_level: int = Field(default=0, description="ProposerBrief.trimmed level; 0 = untouched")
    compact_system: bool = False
    estimated_tokens: int | None = Field(default=None, description="None: the window is unknown")
    max_tokens: int = Field(description="Cap on one reply, within what the window leaves")


#: Arms with a compact system prompt (prompts/proposer_<arm>_compact.md).
COMPACT_ARMS: tuple[Arm, ...] = ("terminal",)


def fit_first_prompt(
    brief: ProposerBrief,
    arm: Arm,
    band: tuple[float, float],
    model: ModelConfig,
    tools: list[dict[str, Any]] | None = None,
) -> FittedPrompt:
    """The system prompt and brief, fitted into `model.context_window`, a quarter of it left free.

    Unknown window: both untouched. Known: the brief's evidence is trimmed level by level
    (fewer failures, shorter excerpts, fewer examples), then the same with the compact system
    prompt; raises ContextWindowError when even the smallest does not fit."""
    window = model.context_window
    if window is None:
        return FittedPrompt(
            system=system_prompt(arm, band), brief=brief_prompt(brief), max_tokens=model.max_tokens
        )
    reserve = reply_reserve(window)
    smallest = 0
    for compact in (False, True) if arm in COMPACT_ARMS else (False,):
        system = system_prompt(arm, band, compact=compact)
        for level in range(len(TRIM_LEVELS)):
            text = brief_prompt(brief.trimmed(level))
            needed = prompt_tokens([system, text], tools)
            smallest = needed
            if needed + reserve <= window:
                return FittedPrompt(
                    system=system,
                    brief=text,
                    trim_level=level,
                    compact_system=compact,
                    estimated_tokens=needed,
                    max_tokens=reply_cap(needed, model.max_tokens, window),
                )
    raise too_large("proposer", smallest, window, reserve)


def revision_prompt(arm: Arm, verdict: Verdict, revision: int, max_revisions: int) -> str:
    name = "proposer_revision" if arm == "terminal" else "proposer_revision_files"
    return load_prompt(name).format(
        revision=revision,
        max_revisions=max_revisions,
        stage=verdict.stage or "-",
        reason=verdict.reason,
        excerpt=verdict.excerpt.strip() or "(no output)",
    )


# -- tools -----------------------------------------------------------------------------------------


def workspace_with_task(
    candidate: Path, limits: SandboxLimits, backend: str | None = None
) -> ShellOpener:
    """A workspace sandbox per MCP session with the candidate folder bound in at TASK_MOUNT.

    `backend`: the engine (the gate's when it is podman or docker; else the default)."""
    engine = backend if backend in ("podman", "docker") else None

    @asynccontextmanager
    async def open_shell() -> AsyncIterator[PersistentShell]:
        from autoenvscaling.tools.sandbox.container import start_workspace

        sandbox = await start_workspace(
            backend=engine,
            limits=limits,
            workdir=TASK_MOUNT,
            binds=[(candidate, TASK_MOUNT)],
        )
        async with sandbox:
            yield await sandbox.open_shell()

    return open_shell


@asynccontextmanager
async def proposer_tools(
    settings: ProposerSettings, candidate: Path
) -> AsyncIterator[list[BaseTool]]:
    """The terminal arm's MCP tools; the sandbox starts on the first terminal command."""
    servers = {
        "terminal": build_terminal_server(
            workspace_with_task(candidate, settings.workspace_limits, settings.gate.backend)
        ),
        "filesystem": build_filesystem_server(candidate),
        "gate": build_gate_server(candidate, settings.gate),
    }
    if settings.solver_feedback and settings.store_path and Path(settings.store_path).exists():
        servers["rollouts"] = build_rollouts_server(settings.store_path)
    async with open_mcp_tools(servers) as tools:
        yield tools


# -- episodes --------------------------------------------------------------------------------------


def _format_verdict(candidate: Path, problem: str) -> Verdict:
    """A reply that is not a task folder: rejected like a lint failure, with the reason why."""
    return Verdict(
        task=str(candidate),
        task_name=candidate.name,
        admitted=False,
        stage="lint",
        reason=f"the reply could not be turned into task files: {problem}",
        proposer_reward=REWARD_VALIDATION_FAILED,
    )


class _Conversation:
    """The attempt's messages and timings across episodes (revisions keep the whole context)."""

    def __init__(self) -> None:
        self.messages: list[AnyMessage] = []
        self.tool_seconds: dict[str, float] = {}
        self.fitted: FittedPrompt | None = None

    def start(self, system: str, brief: str) -> None:
        self.messages = [SystemMessage(system), HumanMessage(brief)]

    async def run(self, loop: Any, budget: LoopBudget, *, nudge: bool) -> _Episode:
        """One episode: the loop until a stop tool, the budget or an error. With `nudge`, a reply
        without a tool call is answered with a reminder to submit (it still costs budget)."""
        state: dict[str, Any] = {
            "messages": self.messages,
            "started_at": time.monotonic(),
            "turns": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }
        while True:
            # durability="exit": the loop keeps no checkpoints, and langgraph 1.2.24 fails a
            # checkpointer-less graph that inherits a parent's durability="sync" (the CLI's).
            state = await loop.ainvoke(
                state, {"recursion_limit": 4 * budget.max_turns + 10}, durability="exit"
            )
            self.tool_seconds.update(state.get("tool_seconds", {}))
            if not (nudge and state.get("stop_reason") == "done"):
                break
            state["messages"] = [*state["messages"], HumanMessage(load_prompt("proposer_continue"))]
            state["stop_reason"] = None
        self.messages = list(state["messages"])
        return _Episode(
            stop_reason=state.get("stop_reason"),
            error=state.get("error"),
            turns=state.get("turns", 0),
            prompt_tokens=state.get("prompt_tokens", 0),
            completion_tokens=state.get("completion_tokens", 0),
        )


def _write_reply(reply: AIMessage | None, candidate: Path) -> str | None:
    """Write a one-reply arm's files into `candidate`; the parse problem, if it is not a task."""
    text = reply.text if reply is not None else ""
    try:
        spec = parse_file_blocks(text)
    except ValueError as exc:  # ReplyFormatError, or a TaskSpec field the model got wrong
        return str(exc) if isinstance(exc, ReplyFormatError) else f"{type(exc).__name__}: {exc}"
    try:
        write_task(spec, candidate, overwrite=True)
    except TaskFormatError:
        pass  # the files are written; the gate's lint stage names the problem
    return None


async def _episodes(
    settings: ProposerSettings,
    candidate: Path,
    conversation: _Conversation,
    tools: list[BaseTool],
    result: ProposalResult,
) -> None:
    """Episodes and gate runs until admitted, out of revisions, unsubmitted or errored."""
    model = load_chat_model(settings.model)
    terminal = settings.arm == "terminal"
    budget = settings.budget if terminal else settings.budget.model_copy(update={"max_turns": 1})
    loop = build_agent_loop(
        model, tools, budget, name="proposer", tool_choice=settings.model.tool_choice
    )
    for revision in range(settings.max_revisions + 1):
        if revision:
            assert result.verdict is not None
            conversation.messages.append(
                HumanMessage(
                    revision_prompt(settings.arm, result.verdict, revision, settings.max_revisions)
                )
            )
            result.revisions = revision
        episode = await conversation.run(loop, budget, nudge=terminal)
        result.turns += episode.turns
        result.prompt_tokens += episode.prompt_tokens
        result.completion_tokens += episode.completion_tokens
        result.stop_reason = episode.stop_reason
        if episode.stop_reason == "error":
            result.outcome, result.reward, result.error = "error", None, episode.error
            return
        if terminal and not episode.submitted:  # ran out of budget without submitting
            result.outcome = "timeout" if episode.stop_reason == "time_budget" else "failed"
            result.reward = REWARD_VALIDATION_FAILED
            result.error = f"never submitted: stopped at {episode.stop_reason}" + (
                f" ({episode.error})" if episode.error else ""  # e.g. the context was full
            )
            return
        result.submitted = True
        problem = None if terminal else _write_reply(_last_reply(conversation.messages), candidate)
        if problem is None:  # a task that states no verifier mode gets the separate verifier
            default_to_separate(candidate)
        verdict = (
            _format_verdict(candidate, problem)
            if problem is not None
            else await validate_task(candidate, settings.gate, skip=())
        )
        result.verdict = verdict
        result.gates.append(
            GateRun(
                revision=revision,
                admitted=verdict.admitted,
                stage=verdict.stage,
                reason=verdict.reason,
                proposer_reward=verdict.proposer_reward,
            )
        )
        result.admitted, result.reward = verdict.admitted, verdict.proposer_reward
        if verdict.infrastructure_error:
            result.outcome, result.error = "error", verdict.reason
            return
        result.outcome = "solved" if verdict.admitted else "failed"
        if verdict.admitted or settings.arm == "prompt_only":
            return


def _last_reply(messages: list[AnyMessage]) -> AIMessage | None:
    return next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)


# -- one attempt, recorded -------------------------------------------------------------------------


def attempt_id_for(settings: ProposerSettings, index: int) -> str:
    if settings.attempt_id:
        return settings.attempt_id
    if not settings.run_id:
        return new_attempt_id()
    return stable_attempt_id(
        settings.run_id,
        settings.round,
        "proposer",
        settings.arm,
        settings.solver_feedback,
        settings.policy_version,
        index,
    )


async def propose(
    brief: ProposerBrief, settings: ProposerSettings, *, out_dir: Path | str, index: int = 0
) -> ProposalResult:
    """One proposer attempt: write a task into a fresh candidate folder under `out_dir`, submit
    it, revise after rejections; recorded as a rollout. Never raises: failures are outcomes."""
    started = time.monotonic()
    attempt_id = attempt_id_for(settings, index)
    candidate = Path(out_dir).resolve() / f"cand-{attempt_id[:12]}"
    if not settings.solver_feedback:
        brief = brief.without_feedback()
    result = ProposalResult(
        attempt_id=attempt_id,
        candidate=str(candidate),
        arm=settings.arm,
        solver_feedback=settings.solver_feedback,
        reward=None,
        outcome="error",
    )
    started_at = datetime.now(UTC)
    conversation = _Conversation()
    schemas: list[dict[str, Any]] = []
    try:
        shutil.rmtree(candidate, ignore_errors=True)  # a resumed attempt starts clean
        candidate.mkdir(parents=True)
        if settings.arm == "terminal":
            async with proposer_tools(settings, candidate) as tools:
                schemas = [convert_to_openai_tool(tool) for tool in tools]
                fitted = _start(conversation, brief, settings, schemas)
                await _episodes(_fitted(settings, fitted), candidate, conversation, tools, result)
        else:
            fitted = _start(conversation, brief, settings, [])
            await _episodes(_fitted(settings, fitted), candidate, conversation, [], result)
    except Exception as exc:  # noqa: BLE001 - an attempt's failure is its outcome, not a crash
        result.outcome, result.reward = "error", None
        result.error = f"{type(exc).__name__}: {exc}"
    steps = steps_from_messages(conversation.messages, conversation.tool_seconds)
    result.tool_calls = sum(1 for s in steps if s.tool_name)
    result.duration_sec = round(time.monotonic() - started, 3)
    if settings.store_path:
        try:
            with RolloutStore(settings.store_path) as store:
                store.record_attempt(
                    _attempt_row(settings, result, index, started_at, conversation.fitted), steps
                )
            # The whole conversation (brief, revisions) for SFT export and proposer training.
            save_transcript(
                settings.store_path,
                Transcript(
                    attempt_id=result.attempt_id,
                    messages=chat_messages(conversation.messages),
                    tools=schemas,
                ),
            )
        except Exception as exc:  # noqa: BLE001 - the result still reaches the caller
            result.error = f"{result.error or ''}; not recorded: {type(exc).__name__}: {exc}"
    return result


def _start(
    conversation: _Conversation,
    brief: ProposerBrief,
    settings: ProposerSettings,
    schemas: list[dict[str, Any]],
) -> FittedPrompt:
    """Open the conversation with the first prompt fitted into the model's window (the tool
    schemas count: they are sent with every call). Raises ContextWindowError before any call."""
    fitted = fit_first_prompt(brief, settings.arm, settings.gate.band, settings.model, schemas)
    conversation.start(fitted.system, fitted.brief)
    conversation.fitted = fitted
    return fitted


def _fitted(settings: ProposerSettings, fitted: FittedPrompt) -> ProposerSettings:
    """The settings with the reply cap that the fitted prompt leaves room for."""
    if fitted.max_tokens == settings.model.max_tokens:
        return settings
    model = settings.model.model_copy(update={"max_tokens": fitted.max_tokens})
    return settings.model_copy(update={"model": model})


def _attempt_row(
    settings: ProposerSettings,
    result: ProposalResult,
    index: int,
    started_at: datetime,
    fit: FittedPrompt | None = None,
) -> Attempt:
    """The attempt as one row, written once at the end (its category is only known then)."""
    try:
        category = load_task(result.candidate).category or ""
    except TaskFormatError:
        category = ""
    return Attempt(
        id=result.attempt_id,
        run_id=settings.run_id,
        round=settings.round,
        role="proposer",
        task_id=Path(result.candidate).name,
        category=category,
        policy_version=settings.policy_version,
        reward=result.reward,
        outcome=result.outcome,
        turns=result.turns,
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
        duration_sec=result.duration_sec,
        error=result.error,
        started_at=started_at,
        finished_at=datetime.now(UTC),
        metadata={
            "arm": result.arm,
            "solver_feedback": result.solver_feedback,
            "index": index,
            "candidate": result.candidate,
            "revisions": result.revisions,
            "submitted": result.submitted,
            "stop_reason": result.stop_reason,
            "admitted": result.admitted,
            "tool_calls": result.tool_calls,
            "stage": result.verdict.stage if result.verdict else None,
            "reason": result.verdict.reason if result.verdict else None,
            "gates": [g.model_dump() for g in result.gates],
            "model": settings.model.model,
            "prompt_fit": fit.model_dump(exclude={"system", "brief"}) if fit else None,
        },
    )


# -- the Studio / langgraph.json face: K proposers fanned out with Send ----------------------------


def gate_config(
    *,
    backend: str = "podman",
    pool_dir: Path | str | None = None,
    solver: ModelConfig | None = None,
    solver_max_turns: int = 20,
    band: tuple[float, float] = (0.25, 0.75),
    **more: Any,
) -> GateConfig:
    """The gate a proposer faces; `solver` (a model) turns on calibration with our solver agent."""
    from autoenvscaling.graphs.solver import SOLVER_AGENT, SolverSettings

    kwargs: dict[str, Any] = {
        "backend": backend,
        "band": band,
        "pool_dir": Path(pool_dir) if pool_dir else None,
        **more,
    }
    if solver is not None:
        settings = SolverSettings(model=solver, budget=LoopBudget(max_turns=solver_max_turns))
        kwargs |= {
            "solver": SOLVER_AGENT,
            "solver_kwargs": {"settings": settings.model_dump(mode="json")},
        }
    return GateConfig(**kwargs)


class ProposerContext(BaseModel):
    """What Studio's form shows for the proposer graph: a view of the run configuration
    (graphs/config.py) plus the standalone graph's own folders."""

    model_config = ConfigDict(extra="forbid")

    model: str = from_run("policy_model", description="init_chat_model string")
    base_url: str | None = from_run("policy_base_url", description="OpenAI-compatible endpoint")
    arm: str = from_run("arm")
    solver_feedback: bool = from_run("solver_feedback", description="Show the solver's rollouts")
    max_turns: int = from_run("proposer_max_turns", 40, "Model calls per episode")
    time_budget_sec: float = Field(default=1800, description="Wall time per episode")
    max_tokens: int = from_run("max_tokens", 8192)
    max_revisions: int = from_run("max_revisions")
    pool_dir: str = Field(default="tasks/seed", description="The task pool (examples, dedup)")
    out_dir: str = Field(default="candidates", description="Candidate folders go here")
    store_path: str | None = Field(default=None, description="Rollout store (SQLite)")
    backend: str = from_run("backend", description="Gate engine: podman | docker")
    calibrate: bool = from_run("calibrate", False, "Calibrate against the solver (same model)")
    policy_version: str = Field(default="base", description="Recorded with rollouts")


class ProposeInput(TypedDict):
    n: int


class ProposeState(ProposeInput, total=False):
    briefs: list[dict[str, Any]]
    results: Annotated[list[dict[str, Any]], operator.add]


class _Slot(TypedDict):
    index: int
    brief: dict[str, Any]


def _settings_from(ctx: ProposerContext) -> ProposerSettings:
    model = ModelConfig(model=ctx.model, base_url=ctx.base_url, max_tokens=ctx.max_tokens)
    return ProposerSettings(
        model=model,
        arm=ctx.arm,  # type: ignore[arg-type]  # validated by pydantic
        solver_feedback=ctx.solver_feedback,
        max_revisions=ctx.max_revisions,
        budget=LoopBudget(
            max_turns=ctx.max_turns, time_budget_sec=ctx.time_budget_sec, max_total_tokens=400_000
        ),
        gate=gate_config(
            backend=ctx.backend, pool_dir=ctx.pool_dir, solver=model if ctx.calibrate else None
        ),
        store_path=ctx.store_path,
        policy_version=ctx.policy_version,
        run_id="",
    )


async def _inspect(state: ProposeState, runtime: Runtime[ProposerContext]) -> dict[str, Any]:
    ctx = runtime.context or ProposerContext()
    store = RolloutStore(ctx.store_path) if ctx.store_path else None
    try:
        briefs = [
            await asyncio.to_thread(
                build_brief, store, ctx.pool_dir, variant=i, solver_feedback=ctx.solver_feedback
            )
            for i in range(max(1, state.get("n", 1)))
        ]
    finally:
        if store is not None:
            store.close()
    return {"briefs": [b.model_dump(mode="json") for b in briefs]}


def _fan_out(state: ProposeState) -> list[Send]:
    briefs = state.get("briefs", [])  # written by _inspect
    return [Send("propose_one", _Slot(index=i, brief=b)) for i, b in enumerate(briefs)]


async def _propose_one(state: _Slot, runtime: Runtime[ProposerContext]) -> dict[str, Any]:
    slot = state  # one brief, sent by _fan_out
    ctx = runtime.context or ProposerContext()
    result = await propose(
        ProposerBrief.model_validate(slot["brief"]),
        _settings_from(ctx),
        out_dir=ctx.out_dir,
        index=slot["index"],
    )
    return {"results": [result.model_dump(mode="json", exclude={"verdict"})]}


def build_proposer_graph() -> Any:
    builder = StateGraph(ProposeState, input_schema=ProposeInput, context_schema=ProposerContext)
    builder.add_node("inspect", _inspect)
    builder.add_node("propose_one", _propose_one)
    builder.add_edge(START, "inspect")
    builder.add_conditional_edges("inspect", _fan_out, ["propose_one"])
    builder.add_edge("propose_one", END)
    return builder.compile(name="proposer")


graph = build_proposer_graph()
