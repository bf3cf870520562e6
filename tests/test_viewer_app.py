"""The viewer's HTTP face without a browser: read-only, confined to the run folder, its headers,
its command, and the checkpoint reader on a run that has not started or has ended."""

from __future__ import annotations

import operator
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from starlette.testclient import TestClient

from autoenvscaling.viewer.app import create_app
from autoenvscaling.viewer.graph_progress import read_progress

from .viewer_run import ViewerRun, build_run

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def viewer_run(tmp_path_factory: pytest.TempPathFactory) -> ViewerRun:
    import asyncio

    tmp = tmp_path_factory.mktemp("viewer-app")
    return asyncio.run(build_run(tmp / "run", tmp))


@pytest.fixture
def client(viewer_run: ViewerRun) -> Iterator[TestClient]:
    with TestClient(create_app(viewer_run.root), base_url="http://127.0.0.1") as c:
        yield c


def test_every_page_answers_and_nothing_writes(client, viewer_run):
    before = {p: p.stat().st_mtime_ns for p in viewer_run.root.rglob("*") if p.is_file()}
    pages = [
        "/",
        "/live",
        "/curves",
        "/candidates",
        f"/candidates/1/{viewer_run.admitted}",
        "/rollouts",
        f"/rollouts/{viewer_run.refresh}",
        "/trials",
        "/trials/word-count__refresh1",
        "/files/",
        "/files/reports/round-01.md",
    ]
    for page in pages:
        response = client.get(page)
        assert response.status_code == 200, page
        assert response.headers["content-type"].startswith("text/html")
        # Read-only: no page takes a write.
        assert client.post(page).status_code == 405, page
    after = {p: p.stat().st_mtime_ns for p in viewer_run.root.rglob("*") if p.is_file()}
    assert after == before


def test_paths_stay_inside_the_run_folder(client, viewer_run, tmp_path):
    outside = tmp_path / "secret.txt"
    outside.write_text("secret")
    (viewer_run.root / "link-out").symlink_to(outside)
    try:
        for path in (
            "/files/../../../../etc/passwd",
            "/files/%2e%2e/%2e%2e/etc/passwd",
            "/files/link-out",
            "/trials/../manifest.json",
            "/candidates/1/%2e%2e",
            "/candidates/1/cand-nothing",
            "/rollouts/no-such-attempt",
        ):
            response = client.get(path)
            assert response.status_code == 404, path
            assert "secret" not in response.text and "root:" not in response.text
    finally:
        (viewer_run.root / "link-out").unlink()


def test_headers_allow_only_the_viewers_own_files(client):
    response = client.get("/")
    policy = response.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "unsafe-inline" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"
    # A page elsewhere that rebinds its name to 127.0.0.1 is refused by its Host header.
    assert client.get("/", headers={"host": "attacker.example"}).status_code == 400


def test_a_folder_that_is_not_a_run_yet_shows_empty_pages(tmp_path):
    with TestClient(create_app(tmp_path), base_url="http://127.0.0.1") as c:
        for page in ("/", "/curves", "/candidates", "/rollouts", "/trials"):
            assert c.get(page).status_code == 200, page
        assert "No checkpoint yet" in c.get("/").text
    assert read_progress(tmp_path / "graph.sqlite") is None


def test_the_view_command_is_registered():
    env = {**os.environ, "COLUMNS": "200"}
    out = subprocess.run(
        [str(Path(sys.executable).parent / "autoenvscaling"), "view", "--help"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "--port" in out.stdout and "127.0.0.1" in out.stdout


def test_a_long_tool_result_is_cut_on_the_page(client, viewer_run):
    from autoenvscaling.tools.rollouts.store import RolloutStore
    from autoenvscaling.viewer.conversation import TOOL_RESULT_BYTES

    with RolloutStore(viewer_run.root / "rollouts.db") as store:
        store.start_attempt(id="long-output", task_id="t", round=1)
        store.add_step("long-output", 0, tool_name="run", tool_output="x" * 50_000)
        store.finish_attempt("long-output", reward=0.0, outcome="failed")
    page = client.get("/rollouts/long-output").text
    assert page.count("x") < TOOL_RESULT_BYTES + 200
    assert "bytes truncated" in page and "cut:" in page


def test_a_curve_spans_its_values_and_breaks_at_a_missing_one():
    from autoenvscaling.tools.report.metrics import RoundMetrics
    from autoenvscaling.viewer.curves import HEIGHT, PAD, charts

    history = [
        RoundMetrics(round=1, cost_per_valid_environment=0.02),
        RoundMetrics(round=2),
        RoundMetrics(round=3, cost_per_valid_environment=0.01),
    ]
    cost = next(c for c in charts(history) if c.title.startswith("cost"))
    assert (cost.low, cost.high) == (0.0, 0.02)
    runs = cost.lines[0]
    assert [[p.round for p in run] for run in runs] == [[1], [3]]  # no line through round 2
    assert runs[0][0].y == PAD and runs[1][0].y == (HEIGHT - PAD + PAD) / 2


class _State(TypedDict, total=False):
    round: int
    done: Annotated[list[int], operator.add]


#: Set once slot 1 has finished: the failing slots raise only then, or on a loaded machine
#: LangGraph stops the fan-out before slot 1 returns and its branch reads as still running.
_SLOT_1_DONE = threading.Event()


def _work(arg: dict[str, Any]) -> dict[str, Any]:
    if arg["slot"] != 1:
        _SLOT_1_DONE.wait(timeout=30)
        raise RuntimeError("killed")  # the run dies with slots 0 and 2 unfinished
    _SLOT_1_DONE.set()
    return {"done": [arg["slot"]]}


def _review(state: _State) -> dict[str, Any]:
    from langgraph.types import interrupt

    return {"done": [interrupt("veto?")]}


def test_the_checkpoint_says_which_fan_out_branches_finished_and_who_waits(tmp_path):
    """LangGraph's own SQLite checkpoints, read without the graph: a fan-out of three `Send`s of
    which one finished and two raised (the run stopped), then a node waiting on `interrupt`."""
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import Send

    _SLOT_1_DONE.clear()
    builder = StateGraph(_State)
    builder.add_node("work", _work)
    builder.add_node("review", _review)
    builder.add_conditional_edges(START, lambda s: [Send("work", {"slot": i}) for i in range(3)])
    builder.add_edge("work", "review")
    builder.add_edge("review", END)
    db = tmp_path / "graph.sqlite"
    config = {"configurable": {"thread_id": "flywheel"}}
    with sqlite3.connect(db, check_same_thread=False) as conn:
        graph = builder.compile(checkpointer=SqliteSaver(conn))
        with pytest.raises(RuntimeError):
            graph.invoke({"round": 3}, config)
    progress = read_progress(db)
    assert progress is not None and progress.round == 3 and not progress.interrupted
    assert [(n.node, n.slot, n.state) for n in progress.next] == [
        ("work", 0, "failed"),
        ("work", 1, "done"),
        ("work", 2, "failed"),
    ]
    assert progress.running == []

    # A node waiting on a person (the flywheel's review) is shown as waiting.
    waiting = StateGraph(_State)
    waiting.add_node("review", _review)
    waiting.add_edge(START, "review")
    waiting.add_edge("review", END)
    db.unlink()
    with sqlite3.connect(db, check_same_thread=False) as conn:
        waiting.compile(checkpointer=SqliteSaver(conn)).invoke({"round": 4}, config)
    progress = read_progress(db)
    assert progress is not None and progress.interrupted and progress.round == 4
    assert [(n.node, n.state) for n in progress.next] == [("review", "waiting")]
