"""One solver interface: the served solver and the GRPO episode show the policy the same first
input (token ids, with the tiny local tokenizer), the same tools and the same tool-result text."""

from __future__ import annotations

import importlib.util
import json

import pytest
from mcp.shared.memory import create_connected_server_and_client_session

from autoenvscaling.graphs.agent.loop import LoopBudget
from autoenvscaling.graphs.agent.scripted_model import ScriptedChatModel, register, reply, tool_call
from autoenvscaling.graphs.models import ModelConfig
from autoenvscaling.graphs.solver.attempt import SolverSettings, solve_task
from autoenvscaling.mcp_servers.terminal import build_terminal_server
from autoenvscaling.tools.agents.solver_interface import (
    RUN_TIMEOUT_SEC,
    TOOLS,
    clamp_timeout,
    first_messages,
    openai_tools,
    render_mcp_result,
    render_result,
)
from autoenvscaling.training.grpo.episode_env import (
    EpisodeConfig,
    EventLoop,
    TaskEpisode,
    prompt_tools,
)

from .conftest import FIXTURES

pytestmark = pytest.mark.timeout(180)
TASK = FIXTURES / "good_task"
needs_train = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None or importlib.util.find_spec("trl") is None,
    reason="the train extra is not installed (transformers/trl missing)",
)


def _ids(rendered) -> list[int]:
    """apply_chat_template's token ids (transformers 5 returns a BatchEncoding)."""
    return list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)


@needs_train
def test_episode_tools_render_as_the_served_schemas() -> None:
    """TRL renders an environment's methods with get_json_schema: the served dicts, exactly."""
    from transformers.utils import get_json_schema

    assert [get_json_schema(method) for method in prompt_tools()] == openai_tools()


async def test_mcp_terminal_tools_come_from_the_interface() -> None:
    server = build_terminal_server(opener=lambda: None)  # listing tools opens no shell
    async with create_connected_server_and_client_session(server._mcp_server) as client:
        listed = (await client.list_tools()).tools
    assert sorted(t.name for t in listed) == list(TOOLS)
    for tool in listed:
        spec = TOOLS[tool.name]
        assert tool.description == spec.description
        for param in spec.params:
            assert tool.inputSchema["properties"][param.name]["description"] == param.description


def test_run_waits_as_long_in_a_grpo_episode_as_on_the_served_terminal() -> None:
    """The served terminal clamps `run`'s timeout_sec to [0, 600] (default 60); a GRPO episode,
    from the job's own settings (TrainHyperParams -> EpisodeConfig, as the worker builds it),
    lets the same call wait exactly as long (it capped every call at 60 s before)."""
    from autoenvscaling.training.backend import TrainHyperParams

    hyper = TrainHyperParams()
    config = EpisodeConfig(
        command_timeout_sec=hyper.command_timeout_sec, tool_output_chars=hyper.tool_output_chars
    )
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, lambda _task: None, config)  # pyright: ignore[reportArgumentType]
        asked = [None, -5.0, 1.0, 60.0, 61.0, 300.0, 600.0, 601.0, 10_000.0]
        served = [clamp_timeout(t, RUN_TIMEOUT_SEC) for t in asked]
        assert served == [60.0, 0.0, 1.0, 60.0, 61.0, 300.0, 600.0, 600.0, 600.0]
        assert [episode._run_timeout(t) for t in asked] == served
    finally:
        loop.stop()


def test_result_text_is_one_format() -> None:
    mcp_json = json.dumps(
        {"exit_code": 0, "output": "a\n", "running": False, "restarted": False, "note": None}
    )
    assert render_mcp_result(mcp_json) == render_result("a\n", 0) == "a\n[exit code 0]"
    assert render_result("", None, running=True).startswith("[still running")
    assert render_mcp_result("plain error text") == "plain error text"


@needs_train
async def test_first_model_input_is_identical_for_training_and_serving(
    engine_ready, tmp_path, monkeypatch
) -> None:
    """Render the served solver's first request (what an OpenAI-compatible server feeds its chat
    template) and the GRPO episode's first prompt with one tokenizer: the same token ids. Then
    the same command through both tool paths gives the same result text."""
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from langchain_openai.chat_models.base import _convert_message_to_dict

    from autoenvscaling.tools.tasks.format import load_task
    from autoenvscaling.training.grpo.sandboxes import task_starter
    from tests.tiny_model import build_tokenizer

    seen: dict[str, list] = {"tools": [], "calls": []}
    original_bind = ScriptedChatModel.bind_tools

    def recording_bind(self, tools, **kwargs):
        seen["tools"] = [convert_to_openai_tool(t) for t in tools]
        return original_bind(self, tools, **kwargs)

    monkeypatch.setattr(ScriptedChatModel, "bind_tools", recording_bind)
    command = "cd /app && wc -w input.txt && false"

    def respond(messages):
        seen["calls"].append(list(messages))
        return reply("", tool_call("run", command=command)) if len(seen["calls"]) == 1 else "Done."

    settings = SolverSettings(
        model=ModelConfig(model=register("interface-probe", respond)),
        budget=LoopBudget(max_turns=3),
    )
    attempt = await solve_task(TASK, settings, trials_dir=tmp_path / "trials")
    assert attempt.outcome == "failed", attempt.error

    tokenizer = build_tokenizer()
    served_messages = [_convert_message_to_dict(m) for m in seen["calls"][0]]
    served = _ids(
        tokenizer.apply_chat_template(
            served_messages, tools=seen["tools"], add_generation_prompt=True, tokenize=True
        )
    )
    instruction = load_task(TASK).instruction
    # As GRPOTrainer renders an environment_factory prompt (trl 1.16, _tokenize_prompts).
    trained = tokenizer.apply_chat_template(
        conversation=[first_messages(instruction)],
        tools=prompt_tools(),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )["input_ids"][0]
    assert served == trained
    assert '"name": "run"' in tokenizer.decode(trained)

    # The same command through the GRPO episode's tool: the same text the served solver read.
    served_result = seen["calls"][1][-1].content
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(TASK))
        trained_result = episode.run(command)
        loop.run(episode._close())
    finally:
        loop.stop()
    assert served_result == trained_result and trained_result.endswith("[exit code 1]")


@needs_train
def test_a_warm_up_episode_is_the_token_sequence_grpo_builds() -> None:
    """A whole-episode warm-up demo (call, result, closing reply) renders as trl 1.16's GRPO
    concatenates an episode: prompt ids + generated call + `_get_tool_suffix_ids` + next reply;
    TRL parses the call as a `run` tool call and the closing reply as no call (the episode ends)."""
    from types import SimpleNamespace

    from trl import GRPOTrainer
    from trl.chat_template_utils import add_response_schema, parse_response

    from autoenvscaling.training.sft.demos import Demo, demo_rows
    from tests.tiny_model import IM_END, build_tokenizer, tool_call_reply

    tokenizer = add_response_schema(build_tokenizer())
    result = render_result("", 0)
    demo = Demo(
        messages=first_messages("Create /app/done."),
        reply=tool_call_reply("touch /app/done"),
        tool_result=result,
        final="Done.",
    )
    ids, labels = demo_rows(tokenizer, demo, prompt_tools())

    prompt = _ids(
        tokenizer.apply_chat_template(
            conversation=[demo.messages],
            tools=prompt_tools(),
            add_generation_prompt=True,
            tokenize=True,
            return_dict=True,
        )["input_ids"][0]
    )
    trainer = SimpleNamespace(  # what _get_tool_suffix_ids reads of the trainer
        processing_class=tokenizer,
        _tokenizer=tokenizer,
        chat_template=None,
        chat_template_kwargs={},
        _is_vlm=False,
    )
    suffix = GRPOTrainer._get_tool_suffix_ids(
        trainer, [{"role": "tool", "name": "run", "content": result}]
    )
    call = tokenizer(demo.reply + IM_END, add_special_tokens=False)["input_ids"]
    final = tokenizer("Done." + IM_END, add_special_tokens=False)["input_ids"]
    assert ids == prompt + call + suffix + final
    assert labels == [-100] * len(prompt) + call + [-100] * len(suffix) + final

    parsed = parse_response(tokenizer, call, prefix=prompt, tools=prompt_tools())
    assert parsed["tool_calls"][0]["function"] == {
        "name": "run",
        "arguments": {"command": "touch /app/done"},
    }
    closing = parse_response(tokenizer, final, prefix=prompt + call + suffix, tools=prompt_tools())
    assert not closing.get("tool_calls") and closing["content"] == "Done."
