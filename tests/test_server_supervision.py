"""The run supervises its policy server: a real llama.cpp server process killed with SIGSEGV.

Default tier (seconds): a model call in flight when the server is killed ends at once as an
infrastructure failure naming the signal (never the minutes of retries against a dead port); the
server is started again on the same URL serving the same adapter under the same name, and the
next call is answered by it; a second kill takes it down for good and stops the run's work with
the message (signal, log path, the log's faulthandler lines). Slow tier: the same on a real
flywheel round through the CLI (the round completes, the lost attempts counted apart as
infrastructure; a second crash exits 3).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
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
    pytest.skip(
        "llama-cpp-python[server] is not installed (the `embedded` extra)", allow_module_level=True
    )

from autoenvscaling.graphs.agent.loop import LoopBudget, build_agent_loop
from autoenvscaling.graphs.policy_servers import PolicyServers
from autoenvscaling.tools.trials.faults import classify
from autoenvscaling.training.serving.embedded_server import EmbeddedLlamaServer
from autoenvscaling.training.serving.supervision import PolicyServerCrashed

from .conftest import REPO
from .test_embedded_server import _write_lora_gguf

#: SmolLM2's end-of-text tokens, banned so a reply runs to max_tokens: the call is surely in
#: flight when the test kills the server.
NO_EOS = {0: -100, 2: -100}


@pytest.fixture(scope="module")
def model_path() -> Path:
    return ensure_embedded_assets(with_converter=False).model_path


def _chat_model(base_url: str, model: str, max_tokens: int):  # noqa: ANN202 - a ChatOpenAI
    from langchain.chat_models import init_chat_model

    return init_chat_model(
        f"openai:{model}",
        base_url=base_url,
        api_key="none",
        temperature=0,
        max_tokens=max_tokens,
        max_retries=0,  # as graphs/models.py: the agent loop's retries are the ones that count
        timeout=120,
        logit_bias=NO_EOS,
    )


async def _wait_busy(pid: int, timeout_sec: float = 30.0) -> None:
    """Until the server process burns CPU (it decodes our request)."""

    def cpu() -> int:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])  # utime + stime, in ticks

    start = cpu()
    deadline = time.monotonic() + timeout_sec
    while cpu() - start < 20:  # 0.2 s of CPU: well inside the decode
        assert time.monotonic() < deadline, "the server never started decoding"
        await asyncio.sleep(0.05)


def _wait_restarted(server: EmbeddedLlamaServer, old_pid: int, timeout_sec: float = 120) -> None:
    deadline = time.monotonic() + timeout_sec
    while server.pid in (None, old_pid) or not server.running:
        assert time.monotonic() < deadline, "the server was not started again"
        assert server.down is None, server.down.describe()
        time.sleep(0.05)
    server.wait_up(timeout_sec)


@pytest.mark.timeout(300)
async def test_a_crash_mid_call_fails_fast_as_infrastructure_and_the_restart_serves_the_adapter(
    model_path, tmp_path
):
    adapter = tmp_path / "ckpt.gguf"
    _write_lora_gguf(adapter, range(2), scale=0.01)
    async with PolicyServers() as servers:
        await servers.start_embedded(model_path)
        server = servers.embedded
        assert server is not None
        await server.load_lora_adapter("ckpt-0001", adapter)
        url, first_pid = server.base_url, server.pid
        assert first_pid is not None
        # The attempt the solver runs: one model call through the agent loop, as the roles do.
        loop = build_agent_loop(
            _chat_model(url, "ckpt-0001", max_tokens=2000), [], LoopBudget(max_turns=2)
        )
        call = asyncio.create_task(
            loop.ainvoke(
                {"messages": [("user", "Write a long story about a lighthouse keeper.")]},
                {"recursion_limit": 20},
            )
        )
        await _wait_busy(first_pid)
        assert not call.done(), "the reply ended before the kill: nothing was in flight"
        os.kill(first_pid, signal.SIGSEGV)
        killed = time.monotonic()
        state = await call
        failed_after = time.monotonic() - killed
        # Failed at once (not after retries against a dead port), naming the crash.
        assert failed_after < 10, f"the in-flight call took {failed_after:.1f} s to fail"
        assert state["stop_reason"] == "error"
        assert "PolicyServerCrashed" in state["error"], state["error"]
        assert "killed by SIGSEGV" in state["error"]
        assert state.get("model_retries", 0) == 0, state.get("retry_errors")
        # Whose fault: the rule every caller uses (tools/trials/faults.py) says infrastructure.
        assert classify("PolicyServerCrashed", state["error"], where="model").fault == (
            "infrastructure"
        )
        # Back on the same URL, serving the same adapter under the same name.
        await asyncio.to_thread(_wait_restarted, server, first_pid)
        assert server.base_url == url and server.pid != first_pid
        assert "ckpt-0001" in await server.served_models()
        assert server.current().base_url == url
        answered = await _chat_model(url, "ckpt-0001", max_tokens=8).ainvoke("Say hello.")
        assert answered.content
        crash = server.crashes[0]
        assert crash.restarting and crash.crash_number == 1 and crash.pid == first_pid
        log = server.log_path.read_text(errors="replace")
        # faulthandler's report of the crash, and our line saying it was started again
        assert "Fatal Python error: Segmentation fault" in log, log[-2000:]
        assert "started again" in log
        assert "Fatal Python error" in crash.log_tail
        assert servers.down is None


@pytest.mark.timeout(300)
async def test_a_second_crash_takes_the_server_down_and_stops_the_run(model_path):
    async with PolicyServers() as servers:
        await servers.start_embedded(model_path)
        server = servers.embedded
        assert server is not None
        url, first_pid = server.base_url, server.pid
        assert first_pid is not None

        async def the_run() -> None:  # work that would wait for minutes
            os.kill(first_pid, signal.SIGSEGV)
            await asyncio.to_thread(_wait_restarted, server, first_pid)
            assert server.pid is not None
            os.kill(server.pid, signal.SIGSEGV)
            await asyncio.sleep(600)

        started = time.monotonic()
        with pytest.raises(PolicyServerCrashed) as raised:
            await servers.supervise(the_run())
        assert time.monotonic() - started < 120
        message = str(raised.value)
        assert "killed by SIGSEGV" in message and "crash 2" in message, message
        assert str(server.log_path) in message
        assert "Fatal Python error: Segmentation fault" in message  # the log's tail
        assert server.down is not None and not server.running
        # Nothing waits on the port any more: a call is refused at once, and named the crash.
        loop = build_agent_loop(_chat_model(url, "policy", 8), [], LoopBudget(max_turns=1))
        began = time.monotonic()
        state = await loop.ainvoke({"messages": [("user", "hi")]}, {"recursion_limit": 10})
        assert time.monotonic() - began < 10
        assert state["stop_reason"] == "error" and "crash 2" in state["error"]
        with pytest.raises(PolicyServerCrashed):
            servers.raise_if_down()


@pytest.mark.timeout(300)
async def test_a_restart_that_dies_before_it_is_ready_is_the_second_crash(model_path):
    """The restarted process killed the moment it exists, before the supervisor saw it answer:
    that is crash 2 with its own signal, not 'could not be started again' on crash 1 (seen in
    the slow tier under load, where a client was served before the supervisor's poll)."""
    async with PolicyServers() as servers:
        await servers.start_embedded(model_path)
        server = servers.embedded
        assert server is not None and server.pid is not None
        first_pid = server.pid
        os.kill(first_pid, signal.SIGSEGV)
        deadline = time.monotonic() + 60
        while server.pid in (None, first_pid):
            assert time.monotonic() < deadline, "no restart was spawned"
            await asyncio.sleep(0.01)
        os.kill(server.pid, signal.SIGSEGV)
        deadline = time.monotonic() + 120
        while server.down is None:
            assert time.monotonic() < deadline, "the server never went down"
            await asyncio.sleep(0.05)
        message = server.down.describe()
        assert "crash 2" in message and "killed by SIGSEGV" in message, message
        assert [c.crash_number for c in server.crashes] == [1, 2]


def test_doctor_holds_a_chat_with_tools_on_the_embedded_server():
    from autoenvscaling.training.serving.server_check import check_embedded_server

    check = check_embedded_server(max_tokens=8)
    assert check.ok, check.detail
    assert (check.prompt_tokens or 0) > 100 and (check.completion_tokens or 0) > 1, check
    assert check.system_info and "CPU" in check.system_info
    assert check.cpu and "this CPU has them all" in check.cpu


def test_a_run_stopped_by_its_server_exits_3(tmp_path):
    """The CLI's mapping: a run stopped by a lost policy server is infrastructure (3), another
    stop is the work's failure (1)."""
    from autoenvscaling.cli.run import run_summary

    assert run_summary(tmp_path, "PolicyServerCrashed: ...", "infrastructure")["exit_code"] == 3
    assert run_summary(tmp_path, "ValueError: ...")["exit_code"] == 1


# -- a real round through the CLI -------------------------------------------------------------


def _server_pids(root: int) -> list[int]:
    from autoenvscaling.tools.sandbox.shell import host_descendants

    pids = []
    for pid in host_descendants(root):
        try:
            if b"embedded_serve" in Path(f"/proc/{pid}/cmdline").read_bytes():
                pids.append(pid)
        except OSError:
            continue
    return pids


def _serving(proc: subprocess.Popen, timeout_sec: float = 900) -> str:
    """The run's stderr up to the line saying its server answers (the supervision starts then)."""
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + timeout_sec
    for line in proc.stderr:
        seen.append(line)
        if line.strip().startswith("serving "):
            return "".join(seen)
        assert time.monotonic() < deadline, "".join(seen)[-3000:]
    raise AssertionError(f"the run ended before its server answered:\n{''.join(seen)[-3000:]}")


def _one_server(proc: subprocess.Popen, timeout_sec: float, not_pid: int | None = None) -> int:
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the run ended before its server came up"
        pids = [p for p in _server_pids(proc.pid) if p != not_pid]
        if pids:
            return pids[0]
        time.sleep(0.2)
    raise AssertionError("no embedded server process")


def _run(tmp_path: Path, *extra: str) -> subprocess.Popen:
    (tmp_path / "empty").mkdir(exist_ok=True)
    # One held-out task (the preset's split has 12): the round's first model calls are its
    # evaluation's, and the run stays minutes long.
    heldout = tmp_path / "heldout"
    if not heldout.exists():
        first = sorted((REPO / "tasks" / "generated" / "heldout").iterdir())
        shutil.copytree(next(p for p in first if (p / "task.toml").is_file()), heldout / "task")
    env = {**os.environ, "HARBOR_TELEMETRY": "0", "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "autoenvscaling.cli.main",
            "run",
            "--run-dir",
            str(tmp_path / "run"),
            "--no-train",
            "--proposals",
            "1",
            "--rounds",
            "1",
            "--json",
            "--seed-dir",
            str(tmp_path / "empty"),
            "--heldout",
            str(heldout),
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_when_busy(pid: int, timeout_sec: float = 600) -> None:
    asyncio.run(_wait_busy(pid, timeout_sec))
    os.kill(pid, signal.SIGSEGV)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_round_survives_one_crash_and_counts_the_lost_attempts_apart(engine_ready, tmp_path):
    proc = _run(tmp_path)
    try:
        before = _serving(proc)
        pid = _one_server(proc, 60)
        _kill_when_busy(pid)  # the round's own model calls
        _one_server(proc, 120, not_pid=pid)  # started again
        out, err = proc.communicate(timeout=1500)
        err = before + err
    finally:
        if proc.poll() is None:
            proc.kill()
    summary = json.loads(out)
    assert summary["rounds_done"] == 1, err[-3000:]
    assert summary["error"] is None, err[-3000:]
    # The attempts the crash cut short are infrastructure, apart from the model's own failures.
    lost = sum(by.get("infrastructure", 0) for by in summary["errored"].values())
    assert lost >= 1, summary["errored"]
    assert summary["exit_code"] == 3  # an attempt lost to infrastructure (cli/exit_codes.py)
    assert "killed by SIGSEGV" in err


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_second_crash_stops_the_run_with_exit_3(engine_ready, tmp_path):
    proc = _run(tmp_path)
    try:
        url = re.findall(r"at (http://\S+)", _serving(proc))[-1]
        pid = _one_server(proc, 60)
        os.kill(pid, signal.SIGSEGV)
        second = _one_server(proc, 120, not_pid=pid)
        # The same URL answers again (this GET waits in the held socket's backlog meanwhile).
        assert httpx.get(f"{url}/models", timeout=120).status_code == 200
        os.kill(second, signal.SIGSEGV)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 3, err[-3000:]
    summary = json.loads(out)
    assert summary["exit_code"] == 3
    assert "killed by SIGSEGV" in summary["error"] and "crash 2" in summary["error"]
    assert re.search(r"server\.log", summary["error"]), summary["error"]
    assert "Fatal Python error: Segmentation fault" in summary["error"]
