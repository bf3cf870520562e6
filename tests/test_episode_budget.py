"""A training episode is a served episode: GRPO's budgets come from the run's settings."""

from __future__ import annotations

from autoenvscaling.graphs.config import RunConfig, preset
from autoenvscaling.graphs.flywheel.episode_budget import episode_record, solver_episode
from autoenvscaling.training.backend import TrainHyperParams


def test_grpo_takes_the_served_solvers_budgets() -> None:
    config = RunConfig(**preset("embedded"), context_window=8192, temperature=0.6)
    hyper = TrainHyperParams(**solver_episode(config))
    assert hyper.max_reply_tokens == config.max_tokens == 384
    assert hyper.max_turns == config.solver_max_turns == 4
    assert hyper.temperature == 0.6 and hyper.context_window == 8192
    assert hyper.tool_output_chars == config.tool_output_chars
    assert hyper.generation_kwargs() == {"max_new_tokens": 384}
    assert hyper.model_copy(update={"use_vllm": True}).generation_kwargs() == {"max_tokens": 384}


def test_the_episode_budget_is_the_served_bound() -> None:
    hyper = TrainHyperParams(max_reply_tokens=100, max_turns=3, tool_output_chars=1000)
    # Unknown window: every reply (TRL's extra last one included) and every result at its cap.
    assert hyper.episode_tokens(500) == 4 * 100 + 3 * (1000 + 256)
    # A known window bounds the episode to what the longest prompt leaves.
    windowed = hyper.model_copy(update={"context_window": 2048})
    assert windowed.episode_tokens(1500) == 548
    assert windowed.episode_tokens(4000) == 8  # a prompt past the window: the smallest budget
    assert hyper.model_copy(update={"max_completion_length": 96}).episode_tokens(10) == 96


def test_the_manifest_records_both_sides() -> None:
    config = RunConfig(**preset("embedded"), context_window=8192)
    record = episode_record(config)
    served, grpo = record["served_solver"], record["grpo"]
    assert served["max_tokens_per_reply"] == grpo["max_reply_tokens"] == 384
    assert served["max_turns"] == grpo["max_turns"] and served["temperature"] == grpo["temperature"]
    assert served["context_window"] == grpo["context_window"] == 8192
    assert any("turns" in note for note in record["trl_differences"])
