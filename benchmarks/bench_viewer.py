"""The viewer's overview on a large run: 1,000 attempts and 200 candidates (issue #31: < 300 ms).

.venv/bin/python benchmarks/bench_viewer.py                    # 1,000 attempts, 200 candidates
.venv/bin/python benchmarks/bench_viewer.py --attempts 10000 --candidates 1000

The run folder is written by the run's own code: the flywheel's `setup` and `inspect` (the
shipped seed pool, no model: no baseline) stopped at its fan-out, so `graph.sqlite` says a round
is in progress; then the rollout store's `record_attempts` (10 steps an attempt; the last 20
attempts still running), one verdict per candidate from `make_verdict` (the last round's still
being judged have none), and `save_history` for the finished rounds. The overview is served by
uvicorn and fetched over loopback HTTP, as a browser would; each request renders every part the
page has (rounds, what runs now, the candidates still judged, warnings, lineage, manifest).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import uvicorn

from autoenvscaling.tools.gate.config import STAGES
from autoenvscaling.tools.gate.results import StageResult, make_verdict
from autoenvscaling.tools.report.metrics import RoundMetrics
from autoenvscaling.tools.report.run_report import save_history
from autoenvscaling.tools.rollouts.models import Attempt, Step
from autoenvscaling.tools.rollouts.store import RolloutStore
from autoenvscaling.tools.run_dir import RunDir
from autoenvscaling.viewer.app import create_app

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 10
RUNNING = 20


async def _start(root: Path) -> None:
    import aiosqlite
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.builder import build_flywheel, checkpoint_serde

    ctx = FlywheelContext(run_dir=str(root), rounds=ROUNDS, train=False, baseline_tasks=0)
    async with aiosqlite.connect(root / "graph.sqlite") as conn:
        graph = build_flywheel(checkpointer=AsyncSqliteSaver(conn, serde=checkpoint_serde()))
        await graph.ainvoke(
            {"rounds": ROUNDS},
            {"configurable": {"thread_id": "flywheel"}},
            context=ctx,
            interrupt_before=["propose_one"],
            durability="sync",
        )


def build(root: Path, attempts: int, candidates: int) -> None:
    root.mkdir(parents=True)
    asyncio.run(_start(root))
    run = RunDir(root)
    run_id = run.manifest().run_id
    start = datetime.now(UTC) - timedelta(hours=5)
    items = []
    for i in range(attempts):
        running = i >= attempts - RUNNING
        attempt = Attempt(
            id=f"a{i:06d}",
            run_id=run_id,
            round=1 + i * ROUNDS // attempts,
            role="proposer" if i % 10 == 0 else "solver",
            task_id=f"task-{i % 50}",
            reward=None if running else float(i % 2),
            outcome=None if running else ("solved" if i % 2 else "failed"),
            turns=10,
            started_at=start + timedelta(seconds=10 * i),
            metadata={"purpose": "refresh"},
        )
        steps = [
            Step(
                index=s,
                message="thinking",
                tool_name="run",
                tool_args={"command": "ls"},
                tool_output="file\n" * 40,
                exit_code=0,
            )
            for s in range(10)
        ]
        items.append((attempt, steps))
    with RolloutStore(run.rollouts) as store:
        store.record_attempts(items)
    per_round = max(candidates // ROUNDS, 1)
    for c in range(candidates):
        round_ = 1 + c // per_round
        folder = run.candidates(round_) / f"cand-{c:012d}"
        (folder / "environment").mkdir(parents=True)
        (folder / "instruction.md").write_text(f"# Task {c}\n")
        (folder / "environment" / "Dockerfile").write_text("FROM debian\n")
        if round_ == ROUNDS and c % 2:
            continue  # the round in progress: these are still being judged
        results = [
            StageResult(stage=s, passed=True, reason="ok", details={"reward": 1.0}) for s in STAGES
        ]
        verdict = make_verdict(folder, results)
        folder.with_name(f"{folder.name}.verdict.json").write_text(verdict.model_dump_json())
    save_history(
        run.reports,
        [
            RoundMetrics(
                round=r,
                candidates=per_round,
                scored=per_round,
                admitted=per_round // 2,
                valid_environment_rate=0.5,
                warnings=[f"round {r}: a warning"],
            )
            for r in range(1, ROUNDS)
        ],
    )


def measure(root: Path, requests: int) -> list[float]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(create_app(root), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/"
    times = []
    try:
        with httpx.Client() as client:
            client.get(url).raise_for_status()  # warm: imports, template compilation
            for _ in range(requests):
                started = time.perf_counter()
                response = client.get(url)
                times.append(time.perf_counter() - started)
                response.raise_for_status()
                assert "Round" in response.text
    finally:
        server.should_exit = True
        thread.join(10)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=1000)
    parser.add_argument("--candidates", type=int, default=200)
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--json", type=Path, help="write the result here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "run"
        started = time.perf_counter()
        build(root, args.attempts, args.candidates)
        built = time.perf_counter() - started
        times = measure(root, args.requests)
    result = {
        "attempts": args.attempts,
        "candidates": args.candidates,
        "requests": args.requests,
        "overview_median_ms": round(statistics.median(times) * 1000, 1),
        "overview_p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))] * 1000, 1),
        "overview_max_ms": round(max(times) * 1000, 1),
        "build_sec": round(built, 1),
    }
    print(json.dumps(result))
    if args.json:
        args.json.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
