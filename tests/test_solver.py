"""The solver role in real Harbor trials, with scripted model replies and real tool effects."""

from autoenvscaling.graphs.agent.loop import LoopBudget
from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
from autoenvscaling.tools.rollouts.store import RolloutStore

from .conftest import FIXTURES

TASK = FIXTURES / "good_task"
SOLVE = (TASK / "solution" / "solve.sh").read_text()


def _settings(tmp_path, model: str) -> SolverSettings:
    return SolverSettings(
        model=ModelConfig(model=model),
        store_path=str(tmp_path / "rollouts.db"),
        run_id="test",
        budget=LoopBudget(max_turns=6),
    )


async def test_scripted_solver_solves_through_the_terminal(engine_ready, tmp_path):
    model = register(
        "solver-good",
        [
            reply("Let me look.", tool_call("run", command="ls; head -3 input.txt")),
            reply("Now solve it.", tool_call("run", command=SOLVE)),
            reply("", tool_call("run", command="cat /app/top_words.txt")),
            "Done: wrote /app/top_words.txt.",
        ],
    )
    attempt = await solve_task(TASK, _settings(tmp_path, model), trials_dir=tmp_path)
    assert (attempt.reward, attempt.outcome, attempt.steps) == (1.0, "solved", 3)
    with RolloutStore(tmp_path / "rollouts.db") as store:
        trajectory = store.trajectory(attempt.rollout_id)
    assert trajectory.attempt.reward == 1.0 and trajectory.attempt.role == "solver"
    tool_steps = [s for s in trajectory.steps if s.tool_name]
    assert [s.tool_name for s in tool_steps] == ["run", "run", "run"]
    assert "input.txt" in tool_steps[0].tool_output  # the real listing of the real sandbox
    assert tool_steps[2].exit_code == 0


async def test_scripted_solver_that_does_nothing_useful_gets_zero(engine_ready, tmp_path):
    model = register("solver-lazy", [reply("", tool_call("run", command="echo hello")), "Done."])
    attempt = await solve_task(TASK, _settings(tmp_path, model), trials_dir=tmp_path)
    assert (attempt.reward, attempt.outcome, attempt.steps) == (0.0, "failed", 1)
    with RolloutStore(tmp_path / "rollouts.db") as store:
        steps = store.trajectory(attempt.rollout_id).steps
    assert steps[0].tool_output and "hello" in steps[0].tool_output


async def test_solver_cannot_see_tests_and_cannot_forge_its_reward(engine_ready, tmp_path):
    model = register(
        "solver-cheat",
        [
            reply("", tool_call("run", command="ls /tests /solution")),
            reply(
                "",
                tool_call(
                    "run", command="mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt"
                ),
            ),
            "Done.",
        ],
    )
    attempt = await solve_task(TASK, _settings(tmp_path, model), trials_dir=tmp_path)
    with RolloutStore(tmp_path / "rollouts.db") as store:
        steps = store.trajectory(attempt.rollout_id).steps
    assert "No such file or directory" in steps[0].tool_output
    assert attempt.reward == 0.0


async def test_failing_model_is_an_error_outcome_not_a_crash(engine_ready, tmp_path):
    def broken(_messages):
        raise ConnectionError("endpoint down")

    model = register("solver-broken", broken)
    settings = _settings(tmp_path, model).model_copy(
        update={"budget": LoopBudget(max_turns=3, max_retries=1)}
    )
    attempt = await solve_task(TASK, settings, trials_dir=tmp_path)
    assert attempt.outcome == "error" and "endpoint down" in (attempt.error or "")
    # No reward: the verifier judged an untouched workspace, which says nothing about the task.
    assert attempt.reward is None and attempt.model_retries == 1
    with RolloutStore(tmp_path / "rollouts.db") as store:
        stored = store.get_attempt(attempt.rollout_id)
    assert (stored.outcome, stored.reward, stored.metadata["model_retries"]) == ("error", None, 1)


async def test_a_full_context_window_ends_the_attempt_as_a_failure_not_an_error(
    engine_ready, tmp_path
):
    def overflowing(messages):
        if len(messages) > 2:
            raise ValueError("This model's maximum context length is 8192 tokens")
        return reply("", tool_call("run", command="ls"))

    model = register("solver-overflow", overflowing)
    settings = _settings(tmp_path, model).model_copy(
        update={"budget": LoopBudget(max_turns=4, max_retries=0)}
    )
    attempt = await solve_task(TASK, settings, trials_dir=tmp_path)
    assert (attempt.outcome, attempt.stop_reason, attempt.reward) == ("failed", "max_tokens", 0.0)
