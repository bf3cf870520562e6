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
            # Its own working folder: `langgraph dev` keeps pending runs in ./.langgraph_api and
            # takes them up again at its next start (a killed test's run would go first).
            cwd=tmp_path_factory.mktemp("server-cwd"),
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


@pytest.mark.slow
@pytest.mark.timeout(1800)
async def test_served_flywheel_starts_and_stops_the_embedded_policy_itself(
    engine_ready, server, tmp_path
):
    """Studio works alone (issues 32 and 43): the flywheel served by `langgraph dev`, run with its
    default context (no model and no endpoint named: the embedded policy), starts the embedded
    server itself, builds the cold start and serves it to both roles before round 1 (as
    `autoenvscaling run` does: graphs/run_policy.py), runs the round on it under the embedded
    preset, reads the `rounds` input it shows (the context asks for 2, the input for 1: one
    round), and stops the server at the end. Nothing is scripted: the 135M model's own replies
    drive the round. Set: the run folder, a one-task, one-step cold start (the preset's eight
    starter tasks would add ~10 min here; it is built in the run folder, never the machine's
    cache), and no GRPO (on 2 CPU cores it would add ~5 min and is tested elsewhere)."""
    import json

    from langgraph_sdk import get_client

    from autoenvscaling.graphs.config import preset
    from autoenvscaling.tools.rollouts.store import RolloutStore

    client = get_client(url=server)
    run_dir = tmp_path / "run"
    # One held-out task instead of the preset's 12 (two passes of 12 would add ~10 min here):
    # the served run evaluates it before and after its round, as `autoenvscaling run` does.
    heldout = tmp_path / "heldout"
    first = sorted(p for p in (REPO / "tasks" / "generated" / "heldout").iterdir() if p.is_dir())
    shutil.copytree(first[0], heldout / first[0].name)
    cold = tmp_path / "cold-start"
    shutil.copytree(REPO / "tasks" / "starter" / "count-lines", cold / "count-lines")
    context = {
        "run_dir": str(run_dir),
        "train": False,
        "rounds": 2,
        "heldout_dir": str(heldout),
        "cold_start": True,
        "cold_start_tasks": str(cold),
        # One SFT step on examples cut to 2k tokens: what is tested is that Studio's run builds
        # and serves it, not what it learns (`make learn` measures that).
        "cold_start_trl_config": {"max_steps": 1, "max_length": 2048},
    }
    thread = await client.threads.create()
    state = await client.runs.wait(
        thread["thread_id"], "flywheel", input={"rounds": 1}, context=context
    )
    assert "__error__" not in state, state
    assert state["round"] == 2 and [m["round"] for m in state["metrics"]] == [1]

    config = json.loads((run_dir / "manifest.json").read_text())["config"]
    assert config["policy_server"] == "embedded" and config["rounds"] == 1
    base_url = config["policy_base_url"]
    assert base_url and base_url.startswith("http://127.0.0.1:")
    # Resolved as `autoenvscaling run` resolves it: the preset under what the context sets.
    for key, value in preset("embedded").items():
        assert config[key] == context.get(key, value), key
    assert config["train"] is False and config["context_window"]

    # The cold start was built from the run's own task and swapped in for both roles first.
    card = json.loads((run_dir / "cold-start-card.json").read_text())
    checkpoint = card["checkpoint"]
    assert checkpoint and config["policy_checkpoint_id"] == checkpoint, card
    assert sum(card["examples"].values()) > 0, card
    lineage = json.loads((run_dir / "manifest.json").read_text())["policy_lineage"]
    assert lineage[0] == {"round": 0, "checkpoint": checkpoint, "adopted": "before round 1"}
    assert (run_dir / "cold-start" / "card.json").is_file()  # the run's folder, not the cache

    # The served policy answered the round's attempts.
    with RolloutStore(run_dir / "rollouts.db") as store:
        attempts = store.list_attempts(limit=1000)
    assert {a.role for a in attempts} >= {"solver", "proposer"}
    assert all(a.metadata.get("model") in (None, config["policy_model"]) for a in attempts)
    assert any(a.completion_tokens > 0 for a in attempts), [a.metadata for a in attempts]
    assert {a.policy_version for a in attempts} == {checkpoint}, {
        a.policy_version for a in attempts
    }
    # The held-out task was evaluated before the round and after it, never trained on.
    heldout_runs = [a for a in attempts if a.metadata.get("purpose") == "heldout"]
    assert len(heldout_runs) == 2 and {a.task_id for a in heldout_runs} == {first[0].name}, [
        (a.task_id, a.metadata) for a in heldout_runs
    ]

    # ... and is gone once the run ended.
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{base_url}/models", timeout=5)
