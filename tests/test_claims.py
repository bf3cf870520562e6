"""Two coordinator processes on one real PostgreSQL store (tools/rollouts/claims.py): no attempt
runs twice, and the attempts a killed coordinator held are taken up by the other."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any, TypedDict

import pytest
from langgraph.graph import START, StateGraph

from autoenvscaling.graphs.agent.scripted_model import register
from autoenvscaling.graphs.config import FlywheelContext
from autoenvscaling.graphs.flywheel.measure import attempter
from autoenvscaling.graphs.models import Policy
from autoenvscaling.graphs.solver.attempt import SolverAttempt
from autoenvscaling.tools.rollouts.models import stable_attempt_id
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.run_dir import RunDir

pytest.importorskip("psycopg", reason="the postgres extra is not installed")

# One coordinator: every attempt of the round, `k` in flight, each through run_once. An attempt
# is started, worked on (`hang`: forever), logged as run by this process, then finished.
COORDINATOR = textwrap.dedent(
    """
    import asyncio, os, sys, time
    from autoenvscaling.tools.rollouts.claims import run_once
    from autoenvscaling.tools.rollouts.kept import kept_store

    url, log, go, ids, k, hang = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \\
        int(sys.argv[5]), sys.argv[6] == "hang"
    kept = kept_store(url)
    gate = asyncio.Semaphore(k)

    async def one(i):
        attempt_id = f"round-1-attempt-{i:02d}"

        async def run():
            await kept.call(lambda s: s.start_attempt(id=attempt_id, task_id=f"t{i}"))
            print(f"taken {attempt_id}", flush=True)
            await asyncio.sleep(3600 if hang else 0.2)
            with open(log, "a") as f:  # O_APPEND: one line per run, whole
                f.write(f"{os.getpid()} {attempt_id}\\n")
            await kept.call(lambda s: s.finish_attempt(attempt_id, reward=1.0, outcome="solved"))
            return "ran"

        return await run_once(url, attempt_id, run, lambda a: "read", slot=gate, poll_sec=0.1)

    async def main():
        # Connected and ready before the start: a process still connecting under load while the
        # other ran the whole round would take no share.
        await kept.call(lambda s: s.list_attempts(limit=1))
        open(f"{go}.ready-{os.getpid()}", "w").close()
        while not os.path.exists(go):
            await asyncio.sleep(0.01)
        results = await asyncio.gather(*(one(i) for i in range(ids)))
        print("done", results.count("ran"), results.count("read"), flush=True)

    asyncio.run(main())
    """
)


class _SolveState(TypedDict, total=False):
    tasks: list[str]
    first_sample: int
    results: list[dict[str, Any]]


def _start(url: str, log: Path, go: Path, ids: int, k: int, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", COORDINATOR, url, str(log), str(go), str(ids), str(k), mode],
        stdout=subprocess.PIPE,
        text=True,
    )


def _runs(log: Path) -> list[tuple[int, str]]:
    lines = log.read_text().split() if log.exists() else []
    return [(int(pid), attempt) for pid, attempt in zip(lines[::2], lines[1::2], strict=True)]


@pytest.mark.timeout(120)
def test_two_coordinators_never_run_one_attempt_twice(postgres_url, tmp_path):
    log, go = tmp_path / "runs.log", tmp_path / "go"
    procs = [_start(postgres_url, log, go, 60, 8, "work") for _ in range(2)]
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("go.ready-*"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    go.touch()  # both connected: they start together
    outs = [p.communicate(timeout=100)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    runs = _runs(log)
    ran = sorted(attempt for _, attempt in runs)
    assert ran == [f"round-1-attempt-{i:02d}" for i in range(60)]  # each once, none missing
    # Both took a share; each reports the other's attempts as read from the store.
    by_pid = {p.pid: sum(1 for pid, _ in runs if pid == p.pid) for p in procs}
    assert all(n > 0 for n in by_pid.values()), by_pid
    for p, out in zip(procs, outs, strict=True):
        assert f"done {by_pid[p.pid]} {60 - by_pid[p.pid]}" in out
    with RolloutStore(postgres_url) as store:
        rows = store.list_attempts(limit=1000)
        assert len(rows) == 60 and all(a.outcome == "solved" for a in rows)


@pytest.mark.timeout(120)
def test_a_killed_coordinators_attempts_are_taken_up(postgres_url, tmp_path):
    log, go = tmp_path / "runs.log", tmp_path / "go"
    go.touch()
    stuck = _start(postgres_url, log, go, 30, 6, "hang")  # takes 6 attempts and never ends them
    assert stuck.stdout is not None
    held = [stuck.stdout.readline().split()[1] for _ in range(6)]
    other = _start(postgres_url, log, go, 30, 30, "work")
    assert other.stdout is not None
    # The other coordinator runs the 24 free attempts and waits on the 6 held ones.
    deadline = time.monotonic() + 60
    while len(_runs(log)) < 24 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    assert len(_runs(log)) == 24 and not set(held) & {a for _, a in _runs(log)}
    os.kill(stuck.pid, signal.SIGKILL)  # mid-round: its 6 attempts started, none finished
    stuck.wait()
    out = other.communicate(timeout=60)[0]
    assert other.returncode == 0 and "done 30 0" in out, out
    runs = _runs(log)
    assert sorted(a for _, a in runs) == [f"round-1-attempt-{i:02d}" for i in range(30)]
    assert {pid for pid, _ in runs} == {other.pid}
    with RolloutStore(postgres_url) as store:
        assert all(store.get_attempt(a).outcome == "solved" for a in held)


@pytest.mark.timeout(60)
def test_the_flywheel_attempter_reads_what_another_coordinator_ran(postgres_url, tmp_path):
    """On a PostgreSQL run the flywheel's attempter (graphs/flywheel/measure.py) runs an attempt only
    when no coordinator finished it: a finished one returns its stored reward (None for a
    fault) and its solver graph never runs. The graph here records its calls and returns a
    result; the attempt ids are the ones solve_task records under."""
    ran: list[int] = []

    def solve(state: _SolveState) -> dict[str, Any]:
        ran.append(state.get("first_sample", -1))
        done = SolverAttempt(task="t", reward=0.5, steps=0, rollout_id="r", outcome="failed")
        return {"results": [done.model_dump(mode="json")]}

    builder = StateGraph(_SolveState)
    builder.add_node("solve", solve)
    builder.add_edge(START, "solve")
    task = tmp_path / "task-a"
    task.mkdir()
    run = RunDir(tmp_path / "run", store=postgres_url)
    model = register("claims-test", lambda messages: "done")
    ctx = FlywheelContext(run_dir=str(run.root), policy_model=model, policy_server="none")
    policy = Policy.serving(model, None, None, None)
    attempt = attempter(ctx, run, "run-1", 2, policy, builder.compile())

    def attempt_id(sample: int) -> str:
        return stable_attempt_id("run-1", 2, "solver", "task-a", policy.version, sample)

    with RolloutStore(postgres_url) as store:
        for sample, meta in ((0, {}), (1, {"fault": "infrastructure"})):
            store.start_attempt(id=attempt_id(sample), task_id="task-a", run_id="run-1", round=2)
            store.finish_attempt(attempt_id(sample), reward=1.0, outcome="solved", metadata=meta)
        store.start_attempt(id=attempt_id(3), task_id="task-a")  # started, never finished

    async def main() -> list[float | None]:
        return [await attempt(task, i, {"purpose": "refresh"}) for i in range(4)]

    assert asyncio.run(main()) == [1.0, None, 0.5, 0.5]
    assert ran == [2, 3]  # the unfinished and the unknown attempts ran, the finished did not
