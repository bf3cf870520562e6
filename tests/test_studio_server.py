"""The graphs served by a real `langgraph dev` (offline), driven through langgraph-sdk."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from .conftest import FIXTURES, REPO, SEED_DIR
from .flywheel_policy import POLICY
from .test_graph_nesting import assert_flywheel_nesting


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not shutil.which("langgraph", path=str(Path(sys.executable).parent)):
        pytest.skip("langgraph-cli is not installed (the dev extra brings it)")
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"  # outside the project: no reload loop
    env = {
        **os.environ,
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "LANGGRAPH_NO_VERSION_CHECK": "1",
        "HARBOR_TELEMETRY": "0",
        "PYTHONPATH": str(REPO),
    }
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.flywheel_policy",  # langgraph dev, with the scripted policy as POLICY
                "langgraph_cli",
                "dev",
                "--no-browser",
                "--no-reload",
                "--allow-blocking",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--config",
                str(REPO / "langgraph.json"),
            ],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, (
                "langgraph dev did not start:\n" + log.read_text()[-3000:]
            )
            time.sleep(0.5)
        yield url
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=30)


@pytest.mark.timeout(300)
async def test_served_flywheel_graph_shows_its_subgraphs_in_xray(server):
    """Studio's graph view of `flywheel` (the server's xray drawing) nests the proposer
    attempt with its gate, the admission's validation graph and the solver graph."""
    from langgraph_sdk import get_client

    client = get_client(url=server)
    (assistant,) = await client.assistants.search(graph_id="flywheel", limit=1)
    drawn = await client.assistants.get_graph(assistant["assistant_id"], xray=True)
    assert_flywheel_nesting({str(node["id"]) for node in drawn["nodes"]})


@pytest.mark.slow
async def test_served_graphs_validate_a_seed_task_and_run_a_flywheel_round(
    engine_ready, server, tmp_path
):
    from langgraph_sdk import get_client

    client = get_client(url=server)
    names = {a["graph_id"] for a in await client.assistants.search(limit=20)}
    assert {"flywheel", "proposer", "solver", "validation"} <= names

    seed_task = sorted(p for p in SEED_DIR.iterdir() if (p / "task.toml").exists())[0]
    verdict = (
        await client.runs.wait(
            None,
            "validation",
            input={"task": str(seed_task)},
            context={"backend": "podman", "skip": ["calibrate"]},
        )
    )["verdict"]
    assert verdict["admitted"] is True, verdict["reason"]
    assert [s["stage"] for s in verdict["stages"]][:4] == ["lint", "build", "oracle", "nop"]

    seed = tmp_path / "seed"
    seed.mkdir()
    shutil.copytree(FIXTURES / "good_task", seed / "word-count")
    context = {
        "run_dir": str(tmp_path / "run"),
        "rounds": 1,
        "proposals": 2,
        "arm": "error_feedback",
        "policy_model": POLICY,
        "seed_dir": str(seed),
        "train": False,
        "max_revisions": 1,
        "refresh_attempts": 1,
        "solver_max_turns": 3,
    }
    thread = await client.threads.create()
    state = await client.runs.wait(
        thread["thread_id"], "flywheel", input={"rounds": 1}, context=context
    )
    records = state["candidates"]
    assert sorted(c["admitted"] for c in records) == [False, True]
    assert state["metrics"][0]["admitted"] == 1 and state["round"] == 2
    assert (tmp_path / "run" / "reports" / "round-01.md").exists()
