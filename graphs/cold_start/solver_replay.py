"""Replay reference solutions through the served solver: verified trajectories for cold start.

Each task's `solve.sh` becomes a replay plan (training/sft/data.py); a scripted model then says
the plan's comments and issues its commands as `run` tool calls, one per turn, through the SAME
served solver (`graphs.solver.attempt.solve_task`: a real Harbor trial, the MCP terminal attached to the
trial's sandbox, the task's own verifier). Only the model's replies are scripted: every command
runs for real and every tool result is what the terminal returned. Attempts that score 1.0
become SFT examples rendered from the rollout store with the served system prompt and tools.

    autoenvscaling sft-data --seed tasks/seed OUT
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from ...tools.agents import solver_interface as agent_interface
from ...tools.rollouts.store import RolloutStore
from ...tools.tasks.domains import needs_desktop
from ...tools.tasks.format import TaskFormatError, load_task
from ...training.sft.data import (
    NotReplayableError,
    ReplayPlan,
    SFTExample,
    replay_plan,
    solver_example,
)
from ..agent.loop import LoopBudget
from ..agent.scripted_model import register, reply, tool_call
from ..models import ModelConfig
from ..solver.attempt import SolverSettings, solve_task

REPLAY_RUN_ID = "sft-replay"
REPLAY_POLICY = "reference-replay"


class SolverInterface(BaseModel):
    """What the served solver's model is given besides the task: system prompt and tools."""

    system_prompt: str
    tools: list[dict[str, Any]] = Field(description="OpenAI function schemas, as bound")
    desktop_tools: list[dict[str, Any]] = Field(
        description="The schemas bound instead on a computer-use task (the desktop tools too)"
    )
    strip_instruction: bool = Field(default=False, description="The served user turn is stripped")

    def first_messages(self, instruction: str) -> list[dict[str, str]]:
        """The conversation a served attempt starts from."""
        text = instruction.strip() if self.strip_instruction else instruction
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": text},
        ]


async def served_solver_interface() -> SolverInterface:
    """The solver's system prompt and tools exactly as the served solver gives them to its model:
    the one solver interface (tools/agents/solver_interface.py). tests/test_sft_data.py checks the
    rendering against what a served attempt really sends to its endpoint."""

    return SolverInterface(
        system_prompt=agent_interface.system_prompt(),
        tools=agent_interface.openai_tools(),
        desktop_tools=agent_interface.openai_tools(desktop=True),
        strip_instruction=True,
    )


class ReplayResult(BaseModel):
    task_id: str
    reward: float | None = None
    kept: bool = False
    reason: str = ""
    attempt_id: str | None = None
    commands: int = 0
    notes: list[str] = Field(default_factory=list)
    duration_sec: float = 0.0


def scripted_replay(plan: ReplayPlan) -> list[Any]:
    """The model's side of a replay: one reply per command (its comment as the message)."""
    replies: list[Any] = [
        reply(step.comment, tool_call("run", command=step.command)) for step in plan.steps
    ]
    replies.append(plan.summary)
    return replies


async def replay_task(
    task_dir: Path,
    *,
    store_path: Path,
    interface: SolverInterface,
    backend: str | None = None,
    trials_dir: Path | None = None,
) -> tuple[ReplayResult, SFTExample | None]:
    """Replay one task's reference solution; the example when the verifier gives 1.0."""

    task_dir = Path(task_dir).resolve()
    result = ReplayResult(task_id=task_dir.name)
    try:
        task = load_task(task_dir)
        plan = replay_plan(task_dir)
    except (NotReplayableError, TaskFormatError) as exc:
        result.reason = f"not replayable: {exc}"
        return result, None
    result.commands, result.notes = len(plan.steps), plan.notes
    name = register(f"replay-{task_dir.name}-{secrets.token_hex(4)}", scripted_replay(plan))
    settings = SolverSettings(
        model=ModelConfig(model=name),
        budget=LoopBudget(max_turns=len(plan.steps) + 1, time_budget_sec=1800),
        store_path=str(store_path),
        run_id=REPLAY_RUN_ID,
        policy_version=REPLAY_POLICY,
        tags={"purpose": "sft-replay"},
    )
    kwargs: dict[str, Any] = {"trials_dir": trials_dir}
    if backend:
        kwargs["backend"] = backend
    attempt = await solve_task(task_dir, settings, **kwargs)
    result.reward, result.attempt_id = attempt.reward, attempt.rollout_id
    result.duration_sec = round(attempt.duration_sec, 2)
    if attempt.outcome == "error" or attempt.error:
        result.reason = f"infrastructure: {attempt.error}"
        return result, None
    if attempt.reward is None or attempt.reward < 1.0:
        result.reason = f"verifier gave {attempt.reward}: not kept"
        return result, None
    # The served solver bound the desktop tools too on a computer-use task (graphs/solver/harbor_agent.py).
    tools = interface.desktop_tools if needs_desktop(task_dir) else interface.tools
    with RolloutStore(store_path) as store:
        example = solver_example(
            store,
            attempt.rollout_id,
            first=interface.first_messages(task.instruction),
            tools=tools,
            source="seed-replay",
        )
    if example is None:
        result.reason = "the attempt did not end on the closing reply"
        return result, None
    result.kept, result.reason = True, "verifier gave 1.0"
    return result, example


async def replay_tasks(
    task_dirs: Sequence[Path],
    *,
    store_path: Path,
    backend: str | None = None,
    trials_dir: Path | None = None,
    concurrency: int = 2,
    on_done: Callable[[ReplayResult], None] | None = None,
) -> tuple[list[ReplayResult], list[SFTExample]]:
    """Replay many tasks, `concurrency` trials at a time; results in the order given."""
    interface = await served_solver_interface()
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(task_dir: Path) -> tuple[ReplayResult, SFTExample | None]:
        async with gate:
            out = await replay_task(
                task_dir,
                store_path=store_path,
                interface=interface,
                backend=backend,
                trials_dir=trials_dir,
            )
        if on_done is not None:
            on_done(out[0])
        return out

    pairs = await asyncio.gather(*(one(Path(t)) for t in task_dirs))
    return [r for r, _ in pairs], [e for _, e in pairs if e is not None]
