"""One GRPO episode without a model: real podman sandbox, the terminal tools, the verifier.

Also checks that the graph-side training modules never import torch.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage

from autoenvscaling.graphs.agent.loop import LoopBudget
from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
from autoenvscaling.tools.agents.solver_interface import SHELL_BUSY, render_result
from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
from autoenvscaling.training.grpo.sandboxes import task_starter
from tests.test_training_support import make_tasks


def test_only_the_terminal_tools_are_exposed() -> None:
    """TRL turns every public method except reset/get_reward into a tool the model can call:
    exactly the served solver's terminal tools (tools/agents/solver_interface.py)."""
    public = [
        name
        for name, _ in inspect.getmembers(TaskEpisode, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]
    assert public == ["interrupt", "read_output", "run"]


def test_tool_output_is_capped_with_status() -> None:
    text = render_result("x" * 5000, 0, cap=1000)
    assert len(text) < 1100 and text.endswith("[exit code 0]") and "bytes truncated" in text
    assert render_result("", None, running=True, cap=100).startswith("[still running")


def test_graph_side_modules_do_not_import_torch() -> None:
    code = (
        "import sys\n"
        "import autoenvscaling.training.policy, autoenvscaling.training.checkpoints\n"
        "import autoenvscaling.training.backend, autoenvscaling.training.grpo.trl_backend\n"
        "import autoenvscaling.training.serving.vllm_server, autoenvscaling.training.grpo.episode_env\n"
        "import autoenvscaling.training.grpo.sandboxes, autoenvscaling.cli.train\n"
        "heavy = [m for m in ('torch', 'transformers', 'trl', 'peft') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_episode_in_a_live_sandbox(engine_ready, tmp_path: Path) -> None:
    tasks = make_tasks(tmp_path / "tasks")
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset()  # never raises into TRL: a row without a task is our bug, not scored
        assert episode.failure is not None and episode.failure.fault == "infrastructure"
        assert "no `task_dir`" in episode.failure.message
        record = loop.run(episode._finish())
        assert (record.reward, record.fault) == (None, "infrastructure")

        episode.reset(task_dir=str(tasks["write-numbers"]))
        assert episode.run("cd /app && N=1") == "[exit code 0]"
        # Same shell: cwd and variables persist, as in the solver's terminal.
        assert episode.run("echo $N > answer.txt; pwd") == "/app\n[exit code 0]"
        assert episode.run("exit 3").endswith("[exit code 3]")
        record = loop.run(episode._finish())
        assert record.reward == 0.5 and record.tool_calls == 3

        # The pool reuses an instance: reset starts a fresh sandbox (no answer.txt any more).
        episode.reset(task_dir=str(tasks["write-numbers"]))
        assert "No such file" in episode.run("cat /app/answer.txt")
        assert loop.run(episode._finish()).reward == 0.0

        episode.reset(task_dir=str(tasks["hello-file"]))
        episode.run("echo hello > /app/hello.txt")
        assert loop.run(episode._finish()).reward == 1.0  # reward.json, Harbor's first choice
    finally:
        loop.stop()


def test_verifier_without_reward_is_the_tasks_fault(engine_ready, tmp_path: Path) -> None:
    """A task whose test.sh writes no reward file: Harbor gives no reward, and we never invent 0.
    The task's author erred (tools/trials/faults.py): the episode is not scored, never raised."""
    task = make_tasks(tmp_path / "tasks")["hello-file"]
    (task / "tests" / "test.sh").write_text("#!/bin/bash\necho checked\n")
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(task))
        record = loop.run(episode._finish())
        assert (record.reward, record.fault) == (None, "task")
        assert "RewardFileNotFoundError" in (record.error or "")
        assert episode._live is None  # the sandbox was closed all the same
    finally:
        loop.stop()


def test_unknown_backend_is_refused() -> None:
    with pytest.raises(RuntimeError, match="not 'bwrap'"):
        task_starter("bwrap")


@pytest.mark.docker
def test_episode_on_docker(docker_engine, tmp_path: Path) -> None:
    """The same episode through the docker backend's Harbor environment."""
    task = make_tasks(tmp_path / "tasks")["write-numbers"]
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("docker"), EpisodeConfig())
        episode.reset(task_dir=str(task))
        assert (
            episode.run("cd /app && printf '1\\n2\\n' > answer.txt; pwd") == "/app\n[exit code 0]"
        )
        assert loop.run(episode._finish()).reward == 1.0
    finally:
        loop.stop()


async def test_a_busy_shell_reads_the_same_served_and_trained(engine_ready, tmp_path: Path) -> None:
    """`run` while the previous command still runs: the served solver (the real MCP terminal,
    langchain-mcp-adapters' tool, the agent loop's tool node, in a Harbor trial) and the GRPO
    episode give the model byte-identical text, so the policy is trained on what it is served."""
    task = make_tasks(tmp_path / "tasks")["hello-file"]
    slow = tool_call("run", command="sleep 5", timeout_sec=0.2)
    script = [reply("", slow), reply("", tool_call("run", command="true")), "Done."]
    seen: list[list] = []

    def respond(messages):
        seen.append(list(messages))
        return script[len(seen) - 1]

    settings = SolverSettings(
        model=ModelConfig(model=register("busy-probe", respond)), budget=LoopBudget(max_turns=3)
    )
    await solve_task(task, settings, trials_dir=tmp_path / "trials")
    served = seen[2][-1]
    assert isinstance(served, ToolMessage) and served.status == "error"

    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(task))
        assert episode.run("sleep 5", timeout_sec=0.2).startswith("[still running")
        trained = episode.run("true")
        with pytest.raises(ValueError):  # a bad argument: TRL answers it, the episode goes on
            episode.read_output(timeout_sec="soon")  # pyright: ignore[reportArgumentType]
        assert episode.failure is None
        loop.run(episode._close())
    finally:
        loop.stop()
    assert (served.content, trained) == (SHELL_BUSY, SHELL_BUSY)


class _LateNoticedKill:
    """A live task whose engine still says 'running' when first asked after the policy's
    `kill -KILL -1`, then 'gone'; the verifier then cannot find the container."""

    def __init__(self) -> None:
        self.asked = 0

    async def open_shell(self) -> _LateNoticedKill:
        return self

    async def close(self) -> None:
        return None

    async def stopped(self) -> str | None:
        self.asked += 1
        return None if self.asked == 1 else "the sandbox's container is gone"

    async def verify(self) -> float:
        raise RuntimeError("404 Client Error: no container with name or ID found")


def test_a_kill_the_engine_notices_late_is_scored_0_not_dropped(tmp_path: Path) -> None:
    """CI saw this race: the episode's end asked the engine before it noticed the dead init,
    the verifier found no container, and the kill was dropped as infrastructure (sparing the
    policy its 0). The episode now asks again before blaming the engine."""
    live = _LateNoticedKill()

    async def start(_task_dir: str) -> _LateNoticedKill:
        return live

    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, start, EpisodeConfig())  # type: ignore[arg-type]
        episode.reset(task_dir=str(tmp_path))
        record = loop.run(episode._finish())
    finally:
        loop.stop()
    assert (record.reward, record.fault) == (0.0, None), record
    assert record.error is not None and "stopped under the policy's commands" in record.error
    assert live.asked >= 2
