"""The policy's chat format: one template for serving and training, tool calls parsed as TRL does.

The server side is proven against the real embedded server in test_embedded_server.py (token ids
equal to the trainer's); these are the parts that need no model."""

from __future__ import annotations

import importlib.util
import json

import pytest

from autoenvscaling.training.chat_format import (
    ChatFormatError,
    parse_reply,
    template_path,
    tool_chat_template,
    wire_to_template,
)

needs_trl = pytest.mark.skipif(
    importlib.util.find_spec("trl") is None, reason="the train extra (trl) is not installed"
)


@needs_trl
def test_the_template_is_trls_own_text() -> None:
    """No copy: the exact string TRL's trainers recognise (their tool-call parser keys on it)."""
    from trl.chat_template_utils import qwen2_5_chat_template

    assert tool_chat_template() == qwen2_5_chat_template
    assert "<tool_response>" in tool_chat_template() and "tojson" in tool_chat_template()


def test_a_missing_trl_is_a_clear_error(monkeypatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ChatFormatError, match="install the `train` extra"):
        template_path()


def test_wire_arguments_become_dicts_and_null_content_empty() -> None:
    wire = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "a",
                    "type": "function",
                    "function": {"name": "run", "arguments": '{"command": "ls"}'},
                },
                {
                    "id": "b",
                    "type": "function",
                    "function": {"name": "run", "arguments": "not json"},
                },
            ],
        }
    ]
    out = wire_to_template(wire)
    assert out[0]["content"] == ""
    assert out[0]["tool_calls"][0]["function"]["arguments"] == {"command": "ls"}
    assert out[0]["tool_calls"][1]["function"]["arguments"] == "not json"
    assert wire[0]["content"] is None  # the request is not modified in place


@pytest.mark.parametrize(
    ("text", "content", "calls"),
    [
        ("plain answer", "plain answer", []),
        (
            'I will look.\n<tool_call>\n{"name": "run", "arguments": {"command": "ls"}}\n</tool_call>',
            "I will look.",
            [("run", {"command": "ls"})],
        ),
        (
            '<tool_call>\n{"name": "run", "arguments": {"command": "a"}}\n</tool_call>\n'
            '<tool_call>\n{"name": "interrupt", "arguments": {}}\n</tool_call><|im_end|>',
            "",
            [("run", {"command": "a"}), ("interrupt", {})],
        ),
        ('<tool_call>\n{"name": "run", "arguments": {"command": \n</tool_call>', None, []),
        ('<tool_call>\n["run"]\n</tool_call>', None, []),
        ('<tool_call>\n{"name": "run", "arguments": "ls"}\n</tool_call>', None, []),
    ],
)
def test_parse_reply(text: str, content: str | None, calls: list) -> None:
    reply = parse_reply(text)
    assert [(c.name, c.arguments) for c in reply.tool_calls] == calls
    # A malformed call is no call: the reply stays content, word for word.
    assert reply.content == (content if content is not None else text)


@needs_trl
@pytest.mark.parametrize(
    "text",
    [
        'Sure.\n<tool_call>\n{"name": "run", "arguments": {"command": "wc -w x"}}\n</tool_call><|im_end|>',
        '<tool_call>\n{"name": "read_output", "arguments": {"timeout_sec": 5}}\n</tool_call><|im_end|>',
        "No tools needed.<|im_end|>",
    ],
)
def test_parse_agrees_with_the_trainers_parser(text: str) -> None:
    """TRL parses the policy's completions with the response schema of this template; the server
    must split a reply the same way."""
    from trl.chat_template_utils import add_response_schema

    from tests.tiny_model import build_tokenizer

    tokenizer = add_response_schema(build_tokenizer())
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False
    )
    theirs = tokenizer.parse_response(text, prefix=prompt)
    ours = parse_reply(text)
    their_calls = [
        (c["function"]["name"], c["function"]["arguments"]) for c in theirs.get("tool_calls") or []
    ]
    assert [(c.name, c.arguments) for c in ours.tool_calls] == their_calls
    assert ours.content.strip() == (theirs.get("content") or "").strip()


@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason="the embedded extra is not installed"
)
def test_required_tool_choice_compiles_a_call_grammar() -> None:
    from autoenvscaling.tools.agents.solver_interface import openai_tools
    from autoenvscaling.training.serving.tool_chat import forced_tools, tool_call_grammar

    tools = openai_tools()
    assert forced_tools(tools, "auto") == [] and forced_tools(tools, "none") == []
    assert forced_tools(tools, "required") == tools
    named = forced_tools(tools, {"type": "function", "function": {"name": "interrupt"}})
    assert [t["function"]["name"] for t in named] == ["interrupt"]
    assert tool_call_grammar(tools) is not None
    json.dumps(tools)  # the schemas the grammar was built from are plain JSON


@pytest.mark.skipif(
    importlib.util.find_spec("fastapi") is None, reason="the embedded extra is not installed"
)
def test_a_request_is_normalised_for_llama_cpp() -> None:
    from autoenvscaling.training.serving.embedded_serve import SAMPLING_DEFAULTS, _openai_request

    body = {
        "messages": [{"role": "assistant", "content": None}],
        "max_completion_tokens": 12,
        "top_p": 0.5,
    }
    out = json.loads(_openai_request(json.dumps(body).encode()))
    assert out["messages"][0]["content"] == "" and out["max_tokens"] == 12
    assert out["top_p"] == 0.5  # what the client set stays
    assert {k: out[k] for k in SAMPLING_DEFAULTS if k != "top_p"} == {
        k: v for k, v in SAMPLING_DEFAULTS.items() if k != "top_p"
    }
    explicit = json.loads(
        _openai_request(json.dumps({"max_tokens": 3, "max_completion_tokens": 9}).encode())
    )
    assert explicit["max_tokens"] == 3
