"""The proposer's first prompt fits the model's context window (scripted models only, no weights).

The embedded SmolLM2 (n_ctx 8192) got an 8169-token first prompt and had 23 tokens left to reply:
every embedded round proposed nothing. These check the fitting itself, fast and without sandboxes.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from langgraph.runtime import Runtime

from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel import measure, nodes
from autoenvscaling.graphs.models import ModelConfig, Policy
from autoenvscaling.graphs.proposer.prompts import brief_prompt, fit_first_prompt, system_prompt
from autoenvscaling.graphs.proposer.record import propose
from autoenvscaling.graphs.proposer.settings import ProposerSettings
from autoenvscaling.graphs.solver.harbor_agent import solver_model_for
from autoenvscaling.tools.agents.brief import FailureNote, ProposerBrief, TaskRate, build_brief
from autoenvscaling.tools.agents.prompt_fit import (
    ContextWindowError,
    estimate_tokens,
    prompt_tokens,
)

pytestmark = pytest.mark.timeout(120)

SEED = Path(__file__).resolve().parents[1] / "tasks" / "seed"
BAND = (0.25, 0.75)
INSTRUCTIONS = "Write one new task for the pool."


def big_brief() -> ProposerBrief:
    """The seed pool's brief with plenty of evidence: long failures, many rates, 3 examples."""
    brief = build_brief(None, SEED, n_examples=3, max_file_chars=2500)
    failures = [
        FailureNote(
            task_id=f"task-{i}",
            category="logs",
            outcome="failed",
            reward=0.0,
            error_output="Traceback (most recent call last):\n" + "x = 1 / 0\n" * 60,
        )
        for i in range(5)
    ]
    rates = [
        TaskRate(task_id=f"task-{i}", category="logs", attempts=4, pass_rate=0.5, mean_reward=0.5)
        for i in range(15)
    ]
    return brief.model_copy(update={"failures": failures, "task_rates": rates})


def fits(fitted, window: int, reserve: int) -> bool:
    return fitted.estimated_tokens + reserve <= window


def test_large_evidence_is_trimmed_to_fit_and_keeps_the_instructions() -> None:
    brief = big_brief()
    full = brief_prompt(brief)
    model = ModelConfig(max_tokens=1024, context_window=6000)
    fitted = fit_first_prompt(brief, "terminal", BAND, model)
    assert fitted.trim_level > 0 and not fitted.compact_system
    assert fits(fitted, 6000, 6000 // 4)
    assert fitted.estimated_tokens == prompt_tokens([fitted.system, fitted.brief])
    assert len(fitted.brief) < len(full)
    # The structure and the task-writing instructions survive; evidence is what shrank.
    assert INSTRUCTIONS in fitted.brief
    assert "## Example tasks from the pool" in fitted.brief
    assert "## What the solver does" in fitted.brief
    assert fitted.brief.count("Traceback") < full.count("Traceback")
    assert fitted.system == system_prompt("terminal", BAND)
    # The reply gets what the window leaves, up to its cap.
    assert fitted.max_tokens == 1024


def test_tool_schemas_count_and_the_compact_system_prompt_is_the_last_resort() -> None:
    brief = big_brief()
    schemas = [
        {"type": "function", "function": {"name": f"t{i}", "description": "d" * 400}}
        for i in range(8)
    ]
    model = ModelConfig(max_tokens=384, context_window=4096)
    without = fit_first_prompt(brief, "terminal", BAND, model)
    with_tools = fit_first_prompt(brief, "terminal", BAND, model, schemas)
    assert (with_tools.compact_system, with_tools.trim_level) > (
        without.compact_system,
        without.trim_level,
    )
    assert with_tools.compact_system  # the full system prompt and the tools leave no room
    assert fits(with_tools, 4096, 4096 // 4)
    assert INSTRUCTIONS in with_tools.brief
    assert "write_file" in with_tools.system and "submit" in with_tools.system


def test_a_window_too_small_for_the_minimum_names_the_numbers() -> None:
    model = ModelConfig(max_tokens=384, context_window=1000)
    with pytest.raises(ContextWindowError, match=r"needs at least \d+ tokens.*window is 1000"):
        fit_first_prompt(big_brief(), "terminal", BAND, model)


def test_no_window_no_trimming() -> None:
    brief = big_brief()
    model = ModelConfig(max_tokens=8192)  # context_window None: a real endpoint, unknown
    fitted = fit_first_prompt(brief, "terminal", BAND, model)
    assert fitted.brief == brief_prompt(brief)
    assert fitted.system == system_prompt("terminal", BAND)
    assert (fitted.trim_level, fitted.compact_system, fitted.max_tokens) == (0, False, 8192)
    assert fitted.estimated_tokens is None


async def test_the_attempt_fails_at_once_without_calling_the_model(tmp_path: Path) -> None:
    calls: list[int] = []

    def responder(messages):  # must never run
        calls.append(len(messages))
        return "no"

    name = register("ctxfit-never-called", responder)
    settings = ProposerSettings(
        model=ModelConfig(model=name, max_tokens=384, context_window=1000), arm="prompt_only"
    )
    result = await propose(big_brief(), settings, out_dir=tmp_path)
    assert calls == []
    assert result.outcome == "error" and result.turns == 0
    assert "ContextWindowError" in (result.error or "")
    assert "context window is 1000" in (result.error or "")


async def test_a_fitting_prompt_reaches_the_model_with_a_capped_reply(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    def responder(messages):
        seen.append((messages[0].content, messages[1].content))
        return "no task"

    name = register("ctxfit-fits", responder)
    settings = ProposerSettings(
        model=ModelConfig(model=name, max_tokens=8192, context_window=8192),
        arm="prompt_only",
        max_revisions=0,
    )
    brief = big_brief()
    await propose(brief, settings, out_dir=tmp_path)
    assert len(seen) == 1
    system, first = seen[0]
    assert prompt_tokens([system, first]) + 8192 // 4 <= 8192
    assert INSTRUCTIONS in first


def test_the_solver_reply_is_capped_to_what_the_window_leaves() -> None:
    system, user = "s" * 3000, "u" * 3000
    assert solver_model_for(ModelConfig(max_tokens=4096), system, user).max_tokens == 4096
    capped = solver_model_for(ModelConfig(max_tokens=4096, context_window=4096), system, user)
    assert 1 <= capped.max_tokens < 4096 - 2 * estimate_tokens(system)
    roomy = solver_model_for(ModelConfig(max_tokens=384, context_window=8192), system, user)
    assert roomy.max_tokens == 384


def test_the_run_window_reaches_the_policy_roles_only() -> None:
    ctx = FlywheelContext(context_window=8192, max_tokens=384)
    policy = Policy(model="openai:policy")
    assert measure.role_model(ctx, policy, "proposer").context_window == 8192
    assert measure.role_model(ctx, policy, "solver").context_window == 8192
    apart = FlywheelContext(context_window=8192, proposer_model="openai:frontier")
    assert measure.role_model(apart, policy, "proposer").context_window is None
    assert measure.role_model(FlywheelContext(), policy, "solver").context_window is None


async def test_propose_admit_is_a_real_duration(tmp_path: Path, monkeypatch) -> None:
    """The round starts before inspect: a slow inspect and a quick propose is not negative."""

    def slow_brief(*args, **kwargs):
        time.sleep(0.3)
        return ProposerBrief()

    monkeypatch.setattr(nodes, "build_brief", slow_brief)  # the name inspect calls
    before = time.time()
    context = FlywheelContext(run_dir=str(tmp_path / "run"), policy_server="none")
    runtime = Runtime(context=context)
    state = {"round": 2, "run_id": "r", "policy": Policy()}
    update = await nodes.inspect(state, runtime)  # type: ignore[arg-type]
    assert before <= update["round_started"] <= before + 0.1
    assert update["stage_seconds"]["inspect"] >= 0.3
    state = {**update}
    seconds = nodes.propose_admit_seconds(state, time.time() + 0.5)  # type: ignore[arg-type]
    assert 0.4 <= seconds["propose_admit"] <= 0.7
    late = nodes.propose_admit_seconds(state, update["round_started"])  # type: ignore[arg-type]
    assert late["propose_admit"] == 0.0
