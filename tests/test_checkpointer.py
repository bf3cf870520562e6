"""The run's checkpointer on SQLite and on a real PostgreSQL server: a LangGraph graph killed in
one process resumes in another from its last checkpoint, with the flywheel's typed state restored
as models (`checkpoint_serde`); on PostgreSQL two runs share the database as two threads."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from autoenvscaling.graphs.checkpointer import SQLITE_THREAD, run_thread

pytestmark = pytest.mark.timeout(300)

# A three-step graph whose state holds a flywheel model (Policy); with CRASH set, the second
# step kills its own process (after the first step's checkpoint is written, durability="sync").
GRAPH = textwrap.dedent(
    """
    import asyncio, json, operator, os, signal, sys
    from pathlib import Path
    from typing import Annotated, TypedDict

    from langgraph.graph import END, START, StateGraph

    from autoenvscaling.graphs.checkpointer import open_saver, run_thread
    from autoenvscaling.graphs.flywheel import checkpoint_serde
    from autoenvscaling.graphs.models import Policy

    location, run_dir = sys.argv[1], Path(sys.argv[2])

    class State(TypedDict, total=False):
        policy: Policy
        log: Annotated[list[str], operator.add]

    def one(state):
        return {"policy": Policy(model="openai:p", version=f"{run_dir.name}-v1"), "log": ["one"]}

    def two(state):
        if os.environ.get("CRASH"):
            print("crashing", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        assert isinstance(state["policy"], Policy), type(state["policy"])  # restored typed
        return {"log": [f"two({os.getpid()})"]}

    def three(state):
        return {"log": ["three"]}

    builder = StateGraph(State)
    for name, fn in (("one", one), ("two", two), ("three", three)):
        builder.add_node(name, fn)
    builder.add_edge(START, "one"); builder.add_edge("one", "two")
    builder.add_edge("two", "three"); builder.add_edge("three", END)

    async def main():
        async with open_saver(location, checkpoint_serde()) as saver:
            graph = builder.compile(checkpointer=saver)
            config = {"configurable": {"thread_id": run_thread(run_dir, location)}}
            before = await graph.aget_state(config)
            if before.next or not before.values:  # stopped midway, or never started
                payload = None if before.next else {"log": []}
                async for _ in graph.astream(payload, config, durability="sync"):
                    pass
            state = (await graph.aget_state(config)).values
            print(json.dumps({"log": state["log"], "policy": type(state["policy"]).__name__,
                              "version": state["policy"].version, "resumed": bool(before.next)}))

    asyncio.run(main())
    """
)


def _run(location: str, run_dir: Path, *, crash: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if crash:
        env["CRASH"] = "1"
    return subprocess.run(
        [sys.executable, "-c", GRAPH, location, str(run_dir)],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "graph.sqlite")
    return request.getfixturevalue("postgres_url")


def test_run_killed_in_one_process_resumes_in_another(location, tmp_path):
    run_dir = tmp_path / "run-a"
    killed = _run(location, run_dir, crash=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert "crashing" in killed.stdout

    resumed = _run(location, run_dir)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout.strip().splitlines()[-1])
    assert out["resumed"] is True  # it went on from the checkpoint, not from the start
    assert out["log"][0] == "one" and out["log"][2] == "three" and len(out["log"]) == 3
    assert out["log"][1].startswith("two(") and out["policy"] == "Policy"
    assert out["version"] == "run-a-v1"


def test_runs_share_one_postgres_database_as_threads(postgres_url, tmp_path):
    assert run_thread(tmp_path / "x", str(tmp_path / "graph.sqlite")) == SQLITE_THREAD
    assert run_thread(tmp_path / "run-a", postgres_url) == "flywheel:run-a"
    # Two runs at once on a fresh database (both create the checkpointer's tables), one killed.
    procs = {
        name: subprocess.Popen(
            [sys.executable, "-c", GRAPH, postgres_url, str(tmp_path / name)],
            env={**os.environ, "PYTHONUNBUFFERED": "1", **({"CRASH": "1"} if crash else {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, crash in (("run-a", True), ("run-b", False))
    }
    outs = {name: proc.communicate(timeout=240) for name, proc in procs.items()}
    assert procs["run-a"].returncode == -signal.SIGKILL, outs["run-a"][1]
    assert procs["run-b"].returncode == 0, outs["run-b"][1]
    done_b = json.loads(outs["run-b"][0].strip().splitlines()[-1])
    assert done_b["version"] == "run-b-v1" and done_b["resumed"] is False

    resumed_a = _run(postgres_url, tmp_path / "run-a")
    assert resumed_a.returncode == 0, resumed_a.stderr
    done_a = json.loads(resumed_a.stdout.strip().splitlines()[-1])
    assert done_a["resumed"] is True and done_a["version"] == "run-a-v1"
    assert len(done_a["log"]) == 3
    # Run b's thread is untouched by a's resume: asked again, it has nothing left to do.
    again_b = _run(postgres_url, tmp_path / "run-b")
    assert json.loads(again_b.stdout.strip().splitlines()[-1])["log"] == done_b["log"]


def _cli(*args: str):
    from typer.testing import CliRunner

    from autoenvscaling.cli.main import app

    result = CliRunner().invoke(app, ["run", *args])
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def test_run_command_finds_the_postgres_run_by_its_folder(postgres_url, tmp_path):
    """`run --store URL` checks the URL's thread of the run folder; a folder's store.json
    names the database for a later `run` or `--resume` given no --store."""
    code, text = _cli("--store", str(tmp_path / "x.db"), "--run-dir", str(tmp_path / "r"))
    assert code == 2 and "postgresql:// URL" in text
    code, text = _cli("--store", postgres_url, "--run-dir", str(tmp_path / "run-a"), "--resume")
    assert code == 2 and "nothing to resume" in text

    run_dir = tmp_path / "run-a"
    assert _run(postgres_url, run_dir, crash=True).returncode == -signal.SIGKILL
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "store.json").write_text(json.dumps({"url": postgres_url}))
    code, text = _cli("--run-dir", str(run_dir))  # no --store: store.json names the database
    assert code == 2 and "already holds a run (thread flywheel:run-a" in text, text
    # Another folder name is another thread of the same database: nothing there to resume.
    code, text = _cli("--store", postgres_url, "--run-dir", str(tmp_path / "run-b"), "--resume")
    assert code == 2 and "nothing to resume" in text
