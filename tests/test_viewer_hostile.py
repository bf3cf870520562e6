"""The viewer against a run folder someone hostile could write (issue 42): links to host files,
FIFOs, absurd parameters. Served over real HTTP (uvicorn on a loopback port, tests/viewer_server).

Pages read only regular files inside the run folder: a candidate's instruction.md / task.toml or
a trial's result.json / verifier/reward.txt that links to a host file is not shown; a FIFO
anywhere a page reads never blocks it (forty requests at once used to take every thread of the
server); a huge number answers 400, not 500; no page error names a path of this machine.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from autoenvscaling.tools.rollouts.store import RolloutStore

from .viewer_server import serve

pytestmark = pytest.mark.timeout(180)

SECRET = "HOST-SECRET-7f3a"
SECRET_REWARD = "0.4242"
CANDIDATE = "cand-linked"
TRIAL = "trial-linked__1"


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """Files of 'the host', outside the run folder."""
    folder = tmp_path / "host"
    folder.mkdir()
    (folder / "secret.md").write_text(f"# {SECRET} the title\n")
    (folder / "secret.toml").write_text(f'[metadata]\ncategory = "{SECRET}"\n')
    (folder / "reward.txt").write_text(f"{SECRET_REWARD}\n")
    result = {
        "verifier_result": {"rewards": {"reward": float(SECRET_REWARD)}},
        "exception_info": {"exception_type": SECRET, "exception_message": "x"},
    }
    (folder / "result.json").write_text(json.dumps(result))
    return folder


def _linked_run(root: Path, host: Path) -> Path:
    """A run whose candidate and trial files are links to host files."""
    candidate = root / "candidates" / "r01" / CANDIDATE
    candidate.mkdir(parents=True)
    (candidate / "instruction.md").symlink_to(host / "secret.md")
    (candidate / "task.toml").symlink_to(host / "secret.toml")
    # A relative link that climbs out of the run folder is refused the same way.
    climb = os.path.relpath(host / "secret.md", candidate / "solution")
    (candidate / "solution").mkdir()
    (candidate / "solution" / "notes.md").symlink_to(climb)
    trial = root / "trials" / TRIAL
    (trial / "verifier").mkdir(parents=True)
    (trial / "config.json").write_text("{}")
    (trial / "result.json").symlink_to(host / "result.json")
    (trial / "verifier" / "reward.txt").symlink_to(host / "reward.txt")
    (trial / "verifier" / "test-stdout.txt").symlink_to(host / "secret.md")
    return root


def test_links_to_host_files_are_not_shown(tmp_path: Path, host: Path):
    run = _linked_run(tmp_path / "run", host)
    with serve(run) as base, httpx.Client(base_url=base, timeout=20) as http:
        pages = {
            "candidates": http.get("/candidates"),
            "candidate": http.get(f"/candidates/1/{CANDIDATE}"),
            "trials": http.get("/trials"),
            "trial": http.get(f"/trials/{TRIAL}"),
            "file": http.get(f"/files/candidates/r01/{CANDIDATE}/instruction.md"),
            "climbing link": http.get(f"/files/candidates/r01/{CANDIDATE}/solution/notes.md"),
            "folder": http.get(f"/files/candidates/r01/{CANDIDATE}"),
        }
    for name, page in pages.items():
        assert SECRET not in page.text, f"{name}: a host file's content is on the page"
        assert SECRET_REWARD not in page.text, f"{name}: a host file's reward is on the page"
    for name in ("candidates", "candidate", "trials", "trial", "folder"):
        assert pages[name].status_code == 200, name  # the page still answers, without them
    assert pages["file"].status_code == 404 and pages["climbing link"].status_code == 404
    assert CANDIDATE in pages["candidate"].text and TRIAL in pages["trials"].text


def _fifo_run(root: Path) -> list[Path]:
    """A run where every file a page reads is a FIFO (no writer: an open blocks for ever)."""
    names = [
        "manifest.json",
        "rollouts.db",
        "graph.sqlite",
        "pool/pool.json",
        "reports/metrics.json",
        "reports/pipe.md",
        f"candidates/r01/{CANDIDATE}/instruction.md",
        f"candidates/r01/{CANDIDATE}/task.toml",
        f"candidates/r01/{CANDIDATE}.verdict.json",
        f"trials/{TRIAL}/result.json",
        f"trials/{TRIAL}/verifier/reward.txt",
        f"trials/{TRIAL}/agent/agent.log",
        "train/r01/result.json",
    ]
    fifos = []
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(path)
        fifos.append(path)
    (root / "trials" / TRIAL / "config.json").write_text("{}")
    return fifos


def _release(fifos: list[Path]) -> None:
    """Open each FIFO for writing and close it: a reader blocked on it (old code) gets EOF."""
    for fifo in fifos:
        try:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            continue  # no reader waiting: nothing to release


@pytest.fixture
def fifo_run(tmp_path: Path) -> Iterator[tuple[Path, list[Path]]]:
    root = tmp_path / "run"
    fifos = _fifo_run(root)
    try:
        yield root, fifos
    finally:
        for _ in range(3):  # a blocked reader may open again after the first release
            _release(fifos)
            time.sleep(0.2)
        shutil.rmtree(root, ignore_errors=True)


def test_fifos_never_block_a_page(fifo_run):
    root, fifos = fifo_run
    pages = [
        "/",
        "/live",
        "/curves",
        "/candidates",
        f"/candidates/1/{CANDIDATE}",
        "/rollouts",
        "/trials",
        f"/trials/{TRIAL}",
        "/files/reports/pipe.md",
        "/files/reports",
    ]
    with serve(root) as base:
        # Forty at once for the FIFO-backed file (the server's thread pool is forty), then
        # every page: all answer, each within seconds.
        def get(path: str) -> tuple[str, int, float]:
            started = time.monotonic()
            try:
                status = httpx.get(base + path, timeout=8).status_code
            except httpx.TimeoutException:
                status = -1
            return path, status, time.monotonic() - started

        try:
            with ThreadPoolExecutor(40) as pool:
                flood = list(pool.map(get, ["/files/reports/pipe.md"] * 40))
            after = [get(page) for page in pages]
        finally:
            _release(fifos)
    slow = [(p, s, round(t, 1)) for p, s, t in flood + after if s == -1 or t > 5]
    assert not slow, f"requests that hung on a FIFO: {slow[:5]} ({len(slow)} in all)"
    assert {s for _, s, _ in flood} == {404}, "a FIFO is not a file to show"
    assert [s for _, s, _ in after] == [200, 200, 200, 200, 200, 200, 200, 200, 404, 200], after


def test_bad_numbers_answer_400_and_errors_name_no_host_path(tmp_path: Path):
    root = tmp_path / "run"
    root.mkdir()
    with RolloutStore(root / "rollouts.db") as store:
        store.start_attempt(id="a1", task_id="t", round=1)
        store.finish_attempt("a1", reward=0.0, outcome="failed")
    with serve(root) as base, httpx.Client(base_url=base, timeout=20) as http:
        answers = {
            path: http.get(path)
            for path in (
                f"/rollouts?offset={10**30}",
                f"/rollouts?round={10**30}",
                "/rollouts?offset=-1",
                f"/rollouts?offset={'9' * 5000}",
                f"/candidates?round={10**30}",
                f"/candidates/{10**30}/x",
                f"/candidates/{'9' * 5000}/x",
            )
        }
        missing = {
            path: http.get(path)
            for path in ("/files/a%00b", "/files/" + "x" * 5000, "/trials/%2e%2e/%2e%2e/etc")
        }
        assert http.get("/rollouts?offset=0").status_code == 200
    for path, answer in answers.items():
        assert answer.status_code == 400, (path[:60], answer.status_code)
        assert "must be a whole number" in answer.text, path[:60]
    for path, answer in missing.items():
        assert answer.status_code == 404, (path[:60], answer.status_code)
    for answer in [*answers.values(), *missing.values()]:
        assert str(tmp_path) not in answer.text and "/tmp" not in answer.text
