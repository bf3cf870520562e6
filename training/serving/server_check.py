"""`doctor`'s model-server check: start the embedded policy server and hold a real chat with it.

A server that starts is not a server that answers: llama.cpp built for another CPU loads the
model and then dies on its first multi-token decode (issue 38). So the check sends what a
proposer sends — a system prompt, a user turn of many tokens, a `tools` list with
`tool_choice="auto"` — through the OpenAI-compatible endpoint, and reports how long the chat
took and llama.cpp's system info line (the CPU features the built library uses).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import httpx
from pydantic import BaseModel, Field

from .cpu_support import ALLOW_NATIVE_ENV, assess, cpu_flags
from .embedded_server import EmbeddedLlamaServer, EmbeddedServerError
from .embedded_setup import llama_cpp_available
from .supervision import ServerCrash, crash_during, log_tail

#: The tool the check offers (the solver's terminal, as the roles show it).
CHECK_TOOL = {
    "type": "function",
    "function": {
        "name": "run_command",
        "description": "Run a shell command in the task's terminal and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command to run."}},
            "required": ["command"],
        },
    },
}

CHECK_MESSAGES = [
    {"role": "system", "content": "You solve tasks in a Linux terminal. Use the tools you have."},
    {
        "role": "user",
        "content": "The folder /app holds a Python project whose tests fail. List the files "
        "in /app, then read the failing test and tell me which function it calls.",
    },
]


class ServerCheck(BaseModel):
    """What the check found."""

    ok: bool
    detail: str = Field(description="One line: what answered and how fast, or why it failed")
    seconds: float | None = Field(default=None, description="The chat's wall time")
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    system_info: str | None = Field(
        default=None, description="llama_cpp.llama_print_system_info() of the server's library"
    )
    cpu: str | None = Field(default=None, description="The CPU-support verdict, where checked")


def system_info(python: str = sys.executable) -> str:
    """llama.cpp's system info line, from a child process (a library that crashes on load
    must not take the doctor with it)."""
    code = "import llama_cpp; print(llama_cpp.llama_print_system_info().decode().strip())"
    done = subprocess.run(
        [python, "-X", "faulthandler", "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"importing llama_cpp {ServerCrash.exit_text(done.returncode)}: "
            f"{(done.stderr or done.stdout).strip()[-1500:]}"
        )
    return done.stdout.strip()


def _cpu_verdict(info: str) -> str:
    """training/serving/cpu_support.py's verdict on `info` against this CPU's flags."""
    support = assess(info, cpu_flags())
    problem = support.problem(allow_native=os.environ.get(ALLOW_NATIVE_ENV) == "1")
    if problem:
        return f"not supported: {problem}"
    return f"built for {', '.join(support.built_for) or 'no listed instruction set'}: this CPU has them all"


def check_embedded_server(max_tokens: int = 48, timeout_sec: float = 180.0) -> ServerCheck:
    """Start the embedded server (set-up's model), complete one chat with tools, stop it."""
    if not llama_cpp_available():
        return ServerCheck(
            ok=False,
            detail="llama-cpp-python[server] is not installed: install the `embedded` extra",
        )
    try:
        info = system_info()
    except (RuntimeError, subprocess.TimeoutExpired, OSError) as exc:
        return ServerCheck(ok=False, detail=f"llama.cpp does not load: {exc}")
    cpu = _cpu_verdict(info)
    server = EmbeddedLlamaServer(max_restarts=0)
    try:
        ref = server.start()
        started = time.monotonic()
        response = httpx.post(
            f"{ref.base_url}/chat/completions",
            timeout=timeout_sec,
            json={
                "model": ref.model,
                "messages": CHECK_MESSAGES,
                "tools": [CHECK_TOOL],
                "tool_choice": "auto",
                "max_tokens": max_tokens,
                "temperature": 0,
            },
        )
        seconds = time.monotonic() - started
        if response.status_code != 200:
            raise EmbeddedServerError(
                f"the chat answered {response.status_code}: {response.text[:500]}"
            )
        body = response.json()
        usage = body.get("usage") or {}
        message = body["choices"][0]["message"]
        said = (
            f"a call to {message['tool_calls'][0]['function']['name']}"
            if message.get("tool_calls")
            else f"text {json.dumps((message.get('content') or '')[:40])}"
        )
        return ServerCheck(
            ok=not cpu.startswith("not supported"),
            detail=f"{ref.model} at {ref.base_url} answered a chat with tools in {seconds:.1f} s "
            f"({usage.get('prompt_tokens')} prompt, {usage.get('completion_tokens')} reply "
            f"tokens: {said})",
            seconds=round(seconds, 2),
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            system_info=info,
            cpu=cpu,
        )
    except (EmbeddedServerError, httpx.HTTPError, KeyError, IndexError, ValueError) as exc:
        crash = crash_during(server.base_url, 0.0, exc) if server.log_path else None
        tail = crash.describe() if crash else f"log {server.log_path}:\n{log_tail(server.log_path)}"
        return ServerCheck(
            ok=False,
            detail=f"the embedded server failed a chat with tools: {type(exc).__name__}: {exc}"
            f"\n{tail}",
            system_info=info,
            cpu=cpu,
        )
    finally:
        server.stop()
