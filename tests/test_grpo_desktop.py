"""A computer-use task's GRPO episode has the served desktop tools (issue 30): the same names,
schemas and order as the served solver binds, TRL routing each row to its episode's tools, and in
a real podman sandbox of a computer-use seed the same text the served MCP tools answer for the
same screen (the served agent loop's own conversion), down to the reward its clicks earn.

No model: the episode is driven as TRL would call it; the served side's replies are scripted."""

from __future__ import annotations

import functools
import importlib.util
import inspect
import shutil
import time
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from autoenvscaling.graphs.agent.loop import LoopBudget, build_agent_loop
from autoenvscaling.graphs.agent.mcp_tools import open_mcp_tools
from autoenvscaling.graphs.agent.scripted_model import register, reply, tool_call
from autoenvscaling.graphs.models import ModelConfig, load_chat_model
from autoenvscaling.mcp_servers.terminal import build_terminal_server
from autoenvscaling.tools.agents.solver_interface import (
    DESKTOP_TOOLS,
    TOOLS,
    first_messages,
    openai_tools,
    render_mcp_result,
)
from autoenvscaling.training.backend import TrainHyperParams, TrainJob
from autoenvscaling.training.grpo.desktop_episode import EPISODES, DesktopTaskEpisode
from autoenvscaling.training.grpo.episode_env import (
    EpisodeConfig,
    EventLoop,
    TaskEpisode,
    prompt_tools,
)
from autoenvscaling.training.grpo.sandboxes import task_starter

from .conftest import SEED_DIR

pytestmark = pytest.mark.timeout(600)
LAMPS = SEED_DIR / "tk-lamp-panel"
SOFTWARE = SEED_DIR / "c-numstat-fix"
needs_train = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("trl") is None,
    reason="the train extra is not installed (transformers/trl missing)",
)


def _public(cls: type) -> list[str]:
    """What TRL 1.16 turns into tools: public functions of the class but reset/get_reward."""
    return [
        name
        for name, _ in inspect.getmembers(cls, predicate=inspect.isfunction)
        if not name.startswith("_") and name not in ("reset", "get_reward")
    ]


def test_a_desktop_episode_exposes_the_terminal_and_the_desktop_tools() -> None:
    assert _public(DesktopTaskEpisode) == sorted([*TOOLS, *DESKTOP_TOOLS])
    assert _public(TaskEpisode) == ["interrupt", "read_output", "run"]
    assert [f.__name__ for f in prompt_tools(DesktopTaskEpisode)] == _public(DesktopTaskEpisode)


@needs_train
def test_desktop_episode_tools_render_as_the_served_schemas() -> None:
    """TRL renders an environment's methods with transformers' get_json_schema: exactly the
    schemas the served solver binds on a computer-use task, in the same order."""
    from transformers.utils import get_json_schema

    rendered = [get_json_schema(method) for method in prompt_tools(DesktopTaskEpisode)]
    assert rendered == openai_tools(desktop=True)
    by_name = {s["function"]["name"]: s for s in rendered}
    for name, spec in DESKTOP_TOOLS.items():
        assert by_name[name] == spec.openai(), name
    assert [get_json_schema(m) for m in prompt_tools()] == openai_tools()  # the terminal's


def test_dataset_rows_name_each_tasks_episode(tmp_path: Path) -> None:
    from autoenvscaling.training.grpo.worker import dataset_rows

    tmux = SEED_DIR / "tmux-seat-booking"
    job = TrainJob(
        job_id="j",
        base_model="unused",
        task_dirs=[LAMPS],
        replay_task_dirs=[SOFTWARE, tmux],
        work_dir=tmp_path / "work",
        hyper=TrainHyperParams(steps=1, tasks_per_step=3, seed=0),
    )
    rows = dataset_rows(job)
    kinds = {Path(r["task_dir"]).name: r["environment"] for r in rows}
    assert kinds == {LAMPS.name: "desktop", SOFTWARE.name: "terminal", tmux.name: "desktop"}
    assert set(kinds.values()) == set(EPISODES)
    # The prompt is the served first messages either way: only the tools differ.
    assert all(r["prompt"][-1]["role"] == "user" for r in rows)


@needs_train
def test_trl_routes_each_row_to_its_episodes_tools(tmp_path: Path) -> None:
    """The real GRPOTrainer with the worker's dict environment_factory: a computer-use row's
    prompt holds the served desktop request's token ids, a terminal row's the terminal's (its
    bytes as before desktop episodes existed), and each row gets only its episode's tools."""
    from trl import GRPOConfig, GRPOTrainer

    from autoenvscaling.tools.tasks.format import load_task
    from tests.tiny_model import TinyModelSpec, build_model, build_tokenizer

    tokenizer = build_tokenizer()
    model = build_model(tokenizer, TinyModelSpec())
    instructions = {p.name: load_task(p).instruction for p in (LAMPS, SOFTWARE)}
    rows = [
        {"prompt": first_messages(instructions[p.name]), "task_dir": str(p), "environment": kind}
        for p, kind in ((SOFTWARE, "terminal"), (LAMPS, "desktop"))
    ]
    from datasets import Dataset

    def never(*_):  # the trainer is only built: no episode runs
        raise AssertionError("no episode should start")

    factories = {name: functools.partial(cls, None, never) for name, cls in EPISODES.items()}
    config = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=8,
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[lambda completions, **_: [0.0] * len(completions)],
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        environment_factory=factories,  # type: ignore[arg-type]
    )
    assert [t.__name__ for t in trainer._env_tools["terminal"]] == [
        "interrupt",
        "read_output",
        "run",
    ]
    assert [t.__name__ for t in trainer._env_tools["desktop"]] == [
        s["function"]["name"] for s in openai_tools(desktop=True)
    ]
    trainer._batch_environments = ["terminal", "desktop"]
    ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
    for got, row, desktop in zip(ids, rows, (False, True), strict=True):
        served = tokenizer.apply_chat_template(
            row["prompt"], tools=openai_tools(desktop=desktop), add_generation_prompt=True
        )
        served = served["input_ids"] if hasattr(served, "keys") else served
        assert list(got) == list(served)
    text = tokenizer.decode(ids[1])
    assert '"name": "screenshot"' in text and '"name": "screenshot"' not in tokenizer.decode(ids[0])


# -- a real episode of a computer-use seed, beside the served MCP tools on the same sandbox --------
START = "DISPLAY=:99 setsid python3 /opt/lamp-panel/lamp_panel.py >/dev/null 2>&1 </dev/null &"


async def _served(sandbox, name: str, args: dict, cap: int) -> str:
    """What the served solver's model reads for one call: the terminal MCP server with the
    desktop tools attached to `sandbox`, through the served agent loop (graphs/solver/harbor_agent.py: the
    same tools, schemas and `present`) with a scripted model that makes this one call."""
    script = [reply("", tool_call(name, **args)), "Done."]
    model = load_chat_model(ModelConfig(model=register(f"served-{name}-{time.time_ns()}", script)))
    server = build_terminal_server(ref=sandbox.ref, desktop=True)
    async with open_mcp_tools({"terminal": server}) as tools:
        loop = build_agent_loop(
            model,
            tools,
            LoopBudget(max_turns=3),
            name="solver",
            schemas=openai_tools(desktop=True),
            present=functools.partial(render_mcp_result, cap=cap),
        )
        state = await loop.ainvoke(
            {"messages": [SystemMessage("s"), HumanMessage("u")], "started_at": time.monotonic()},
            {"recursion_limit": 20},
        )
    (message,) = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert isinstance(message.content, str)
    return message.content


def test_a_desktop_episode_reads_what_the_served_tools_answer(engine_ready, tmp_path) -> None:
    task = tmp_path / LAMPS.name
    shutil.copytree(LAMPS, task)
    config = EpisodeConfig()
    loop = EventLoop()
    try:
        episode = DesktopTaskEpisode(loop, task_starter("podman"), config)
        episode.reset(task_dir=str(task))
        assert episode.failure is None
        assert episode._live is not None
        sandbox = episode._live.sandbox

        def both(name: str, **args) -> str:
            trained = getattr(episode, name)(**args)
            served = loop.run(_served(sandbox, name, args, config.tool_output_chars))
            assert trained == served, (name, args)
            return trained

        first = both("screenshot")  # starts Xvfb :99 and the window manager
        assert first.startswith("[screenshot 1024x768 PNG, ") and first.endswith(
            "]\n[image image/png]"
        ), first
        episode.run(START)
        shown = episode.run(
            "for i in $(seq 100); do DISPLAY=:99 xdotool search --onlyvisible --name "
            "'^Lamp panel$' >/dev/null && break; sleep 0.1; done; sleep 1; echo ok"
        )
        assert shown.endswith("ok\n[exit code 0]"), shown
        shot = both("screenshot")
        assert 'active window: "Lamp panel"' in shot and shot.endswith("\n[image image/png]")
        pressed = both("key", keys="Tab")
        assert pressed.startswith('[pressed Tab; active window: "Lamp panel"'), pressed
        assert both("type_text", text="a").startswith("[typed 1 characters; ")
        # Hostile or wrong arguments: the same errors served and trained, never a dropped episode.
        assert "xdotool key names" in both("key", keys="Return; touch /tmp/pwned")
        assert "1024x768" in both("click", x=5000, y=1)
        bad = episode.click(x="1; touch /tmp/pwned", y=5)  # type: ignore[arg-type]
        assert bad.startswith("[error: invalid arguments: x:"), bad
        assert episode.key(keys=["Return"]).startswith("[error: invalid arguments")  # type: ignore[arg-type]
        assert episode.run("ls /tmp/pwned").endswith("[exit code 2]")
        assert episode.failure is None

        # The episode's own clicks set the lamps and save: its verifier's reward is 1.0.
        env = task / "environment"
        now, want = (
            (env / "lamps.txt").read_text().split(),
            (env / "target.txt").read_text().split(),
        )
        for r in range(6):
            for c in range(6):
                if now[r][c] != want[r][c]:
                    clicked = episode.click(x=50 + 60 * c, y=50 + 60 * r)
                    assert clicked.startswith("[clicked left at "), clicked
        assert episode.click(x=40, y=422).startswith("[clicked left at (40, 422)")
        assert episode.run("sleep 1; cat /app/lamps.txt").startswith("\n".join(want))
        record = loop.run(episode._finish())
    finally:
        loop.stop()
    assert record.reward == 1.0 and record.fault is None, record
    assert record.actions[:3] == ["screenshot", "screenshot", "key Tab"], record.actions
    assert record.tool_calls == len(record.commands) + len(record.actions)


async def test_a_cold_start_replay_records_the_tools_its_solver_was_bound(
    engine_ready, tmp_path, monkeypatch
) -> None:
    """graphs/cold_start/solver_replay.py on a computer-use seed: the SFT example's tools are the list the
    served solver bound in that replay, which is the list a GRPO episode of the task renders."""
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from autoenvscaling.graphs.agent.scripted_model import ScriptedChatModel
    from autoenvscaling.graphs.cold_start.solver_replay import replay_task, served_solver_interface

    bound: list[list[dict]] = []
    original_bind = ScriptedChatModel.bind_tools

    def recording_bind(self, tools, **kwargs):
        bound.append([convert_to_openai_tool(t) for t in tools])
        return original_bind(self, tools, **kwargs)

    monkeypatch.setattr(ScriptedChatModel, "bind_tools", recording_bind)
    result, example = await replay_task(
        LAMPS,
        store_path=tmp_path / "rollouts.db",
        interface=await served_solver_interface(),
        trials_dir=tmp_path / "trials",
    )
    assert result.kept and example is not None, result
    assert bound and all(tools == bound[0] for tools in bound)
    assert example.tools == bound[0] == openai_tools(desktop=True)


def test_a_desktop_call_after_the_policy_killed_its_sandbox_scores_0(engine_ready) -> None:
    """The policy ends every process of its sandbox, then takes a screenshot: the desktop call
    fails on a dead sandbox, and the episode scores 0 (the policy's doing), never dropped as
    infrastructure (which would spare a failing policy its 0), as for the terminal's tools."""
    loop = EventLoop()
    try:
        episode = DesktopTaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(LAMPS))
        assert episode.screenshot().startswith("[screenshot 1024x768 PNG")
        episode.run("kill -KILL -1; sleep 1; echo still-here")
        after = episode.screenshot()
        assert after.startswith("[error:"), after
        record = loop.run(episode._finish())
    finally:
        loop.stop()
    assert record.reward == 0.0 and record.fault is None, record
    assert record.error and "stopped" in record.error, record


# Who owns each Xvfb process (a /proc entry belongs to its process's user; no procps needed).
XVFB_OWNER = (
    'for p in /proc/[0-9]*; do [ "$(cat $p/comm 2>/dev/null)" = Xvfb ] && stat -c %U $p; done; true'
)


def test_the_desktop_runs_as_the_tasks_agent_user_trained_and_served(engine_ready, tmp_path):
    """A computer-use task with `[agent] user = "nobody"`: the episode's desktop (Xvfb started by
    its first screenshot, each xdotool call) runs as nobody, as its shell does and as the served
    terminal's desktop does (graphs/solver/harbor_agent.py terminal_shells: Harbor's trial sets the agent
    user as the environment's default user); the served tools then read the same screen."""
    from autoenvscaling.graphs.solver.harbor_agent import terminal_shells

    task = tmp_path / LAMPS.name
    shutil.copytree(LAMPS, task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", '[agent]\nuser = "nobody"\n'))
    config = EpisodeConfig()
    loop = EventLoop()
    try:
        episode = DesktopTaskEpisode(loop, task_starter("podman"), config)
        episode.reset(task_dir=str(task))
        assert episode.failure is None and episode._live is not None
        trained = episode.screenshot()
        assert trained.startswith("[screenshot 1024x768 PNG"), trained
        assert episode.run("id -un").startswith("nobody\n")
        assert episode.run(XVFB_OWNER) == "nobody\n[exit code 0]"
        environment = episode._live.environment  # type: ignore[attr-defined]

        async def served() -> str:
            with environment.with_default_user("nobody"):  # what Harbor's trial does
                server = build_terminal_server(terminal_shells(environment), desktop=True)
                async with open_mcp_tools({"terminal": server}) as tools:
                    shot = next(t for t in tools if t.name == "screenshot")
                    message = await shot.ainvoke(
                        {"name": "screenshot", "args": {}, "id": "c1", "type": "tool_call"}
                    )
            from autoenvscaling.tools.rollouts.transcripts import content_text

            return render_mcp_result(content_text(message.content), config.tool_output_chars)

        assert loop.run(served()) == trained
        assert episode.run(XVFB_OWNER) == "nobody\n[exit code 0]"  # one display, nobody's
        loop.run(episode._close())
    finally:
        loop.stop()
