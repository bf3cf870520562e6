"""The coordinator alone: K solver episodes in flight against a fake remote sandbox (issue #29.4).

.venv/bin/python benchmarks/bench_concurrency.py                       # K = 1, 4, 16, 64
.venv/bin/python benchmarks/bench_concurrency.py --quick               # one wave per K
.venv/bin/python benchmarks/bench_concurrency.py --k 4 --episodes 8 --exec-ms 50 --json out.json
.venv/bin/python benchmarks/bench_concurrency.py --k 64 --processes 2 --store postgresql://...

What runs is the flywheel's own attempter (graphs/flywheel/measure.py `attempter`: the path the
baseline and the refresh take), with `concurrency` = K: the solver graph, `solve_task`, a real
Harbor trial per episode on our Harbor environment adapter, `SolverAgent` with the agent loop over
the MCP terminal server (in-memory MCP session), and the rollout store in SQLite. Only the
model's replies are scripted (graphs/agent/scripted_model.py) and the sandbox is fake
(benchmarks/fake_remote.py): it sleeps like a remote provider and interprets its commands.

Each K runs in a child process of its own (so one K's memory does not carry into the next),
after one warm-up episode, under a wall-time bound. Measured: episodes/s and tool calls/s, the
event loop's lag (a probe sleeping 10 ms, its overshoot), process CPU per episode, peak RSS and
RSS per episode in flight, threads and open files at peak, and every episode's outcome and tool
results read back from the store.

`--processes N --store URL`: N coordinator processes per K on one PostgreSQL store, each taking
every episode of the same round with K in flight; the store's advisory locks
(tools/rollouts/claims.py) run each episode once. The row sums their CPU and counts the episodes
once, over the slowest process's wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_KS = (1, 4, 16, 64)
RUN_ID = "bench-concurrency"
MODEL = "bench-solver"


# -- the tasks and the scripted solver --------------------------------------------------------
def word_of(i: int) -> str:
    return f"answer-{i:03d}"


def write_tasks(root: Path, n: int) -> list[Path]:
    """`n` small Harbor tasks: write a task-specific word to /app/answer.txt."""
    tasks = []
    for i in range(n):
        task = root / f"bench-task-{i:03d}"
        for folder in ("environment", "tests", "solution"):
            (task / folder).mkdir(parents=True, exist_ok=True)
        (task / "task.toml").write_text(
            'schema_version = "1.4"\n\n[metadata]\nauthor_name = "bench"\ndifficulty = "easy"\n'
            'category = "bench"\ntags = ["software"]\n\n[agent]\ntimeout_sec = 300\n\n'
            "[verifier]\ntimeout_sec = 60\n\n[environment]\ncpus = 1\nmemory_mb = 512\n"
        )
        (task / "instruction.md").write_text(
            f"Write the word `{word_of(i)}` into /app/answer.txt and show the file.\n"
        )
        (task / "environment" / "Dockerfile").write_text(
            "FROM debian:bookworm-slim\nWORKDIR /app\n"
        )
        (task / "tests" / "expected.txt").write_text(word_of(i) + "\n")
        (task / "tests" / "test.sh").write_text(
            "#!/bin/bash\n"
            'if [ "$(cat /app/answer.txt)" = "$(cat /tests/expected.txt)" ]; then\n'
            "  echo 1 > /logs/verifier/reward.txt\nelse\n  echo 0 > /logs/verifier/reward.txt\nfi\n"
        )
        (task / "solution" / "solve.sh").write_text(f"echo {word_of(i)} > /app/answer.txt\n")
        tasks.append(task)
    return tasks


def responder(calls: int) -> Any:
    """The scripted model: `calls` terminal commands, then a closing reply. It reads the task's
    word from the instruction and the turn from the conversation, so one responder serves every
    episode in flight."""
    from langchain_core.messages import AIMessage, HumanMessage

    from autoenvscaling.graphs.agent.scripted_model import reply, tool_call

    def answer(messages: Any) -> AIMessage | str:
        done = sum(1 for m in messages if isinstance(m, AIMessage) and m.tool_calls)
        if done >= calls:
            return "Done: /app/answer.txt holds the word."
        asked = next(str(m.content) for m in messages if isinstance(m, HumanMessage))
        word = asked.split("`")[1] if "`" in asked else "missing"
        script = [
            f"echo {word} > /app/answer.txt",
            "cat /app/answer.txt",
            "ls -la /app",
            "seq 1 400",
            "pwd",
        ]
        command = script[done] if done < len(script) else "cat /app/answer.txt"
        return reply(f"Step {done + 1}.", tool_call("run", command=command))

    return answer


# -- one K, in this process --------------------------------------------------------------------
async def run_k(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    import fake_remote  # benchmarks/ is on sys.path (this script's folder)
    from loop_probe import Probe, StallSampler, rss_mb

    from autoenvscaling.graphs.agent.scripted_model import register
    from autoenvscaling.graphs.config import FlywheelContext
    from autoenvscaling.graphs.flywheel.measure import attempter
    from autoenvscaling.graphs.models import Policy
    from autoenvscaling.graphs.solver.builder import graph as solver_graph
    from autoenvscaling.tools.rollouts.store import RolloutStore
    from autoenvscaling.tools.run_dir import RunDir

    k = args.k[0]
    fake_remote.install()
    latency = fake_remote.FakeLatency(
        exec_ms=args.exec_ms,
        start_ms=args.start_ms,
        transfer_ms=args.transfer_ms,
        jitter=args.jitter,
        seed=args.seed,
    )
    fake_remote.configure(latency)
    model = register(MODEL, responder(args.calls))
    tasks = write_tasks(root / "tasks", min(args.episodes, 16))
    run = RunDir(root / "run", store=args.store)
    for folder in (run.root, run.trials):
        folder.mkdir(parents=True, exist_ok=True)
    RolloutStore(run.store).close()
    ctx = FlywheelContext(
        run_dir=str(run.root),
        policy_model=model,
        policy_server="none",
        backend=fake_remote.BACKEND,
        concurrency=k,
        solver_max_turns=args.calls + 2,
    )
    attempt = attempter(
        ctx, run, args.run_id, 1, Policy.serving(model, None, None, None), solver_graph
    )

    # Warm-up: imports, Harbor's first trial, schema caches; not measured (each process its own).
    await attempt(tasks[0], 10_000 + args.process, {"purpose": "warmup"})
    if args.processes > 1:  # the coordinators start the round together
        (root / f"ready-{args.process}").touch()
        while len(list(root.glob("ready-*"))) < args.processes:
            await asyncio.sleep(0.01)
    gc.collect()
    base_rss = rss_mb()
    fake_remote.configure(latency)  # counts from here

    probe = Probe()
    if args.stalls:
        probe.sampler = StallSampler()
        probe.sampler.start()
    probing = asyncio.create_task(probe.run())
    sched0, cpu0, wall0 = loop_thread_sched(), os.times(), time.monotonic()
    jobs = [
        asyncio.ensure_future(attempt(tasks[i % len(tasks)], i, {"purpose": "bench"}))
        for i in range(args.episodes)
    ]
    timed_out = False
    try:
        async with asyncio.timeout(args.timeout_per_k):
            await asyncio.gather(*jobs, return_exceptions=True)
    except TimeoutError:
        timed_out = True
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
    wall = time.monotonic() - wall0
    cpu1, sched1 = os.times(), loop_thread_sched()
    probing.cancel()
    stalls = None
    if probe.sampler is not None:
        probe.sampler.stop()
        stalls = probe.sampler.report()
    crashed = [repr(j.exception())[:300] for j in jobs if not j.cancelled() and j.exception()]
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "k": k,
        "process": args.process,
        "episodes": args.episodes,
        "timed_out": timed_out,
        "wall_sec": round(wall, 2),
        "cpu_sec": round(cpu, 2),
        # The loop thread's own time on a CPU, and runnable but waiting for one (a busy machine).
        "loop_on_cpu_sec": round(sched1[0] - sched0[0], 2),
        "loop_waiting_for_cpu_sec": round(sched1[1] - sched0[1], 2),
        "base_rss_mb": round(base_rss, 1),
        "peak_rss_mb": round(probe.peak_rss_mb, 1),
        "rss_per_episode_mb": round((probe.peak_rss_mb - base_rss) / k, 2),
        "peak_threads": probe.peak_threads,
        "peak_fds": probe.peak_fds,
        "crashed": crashed[:5],
        "crash_count": len(crashed),
        **probe.lag(),
        **read_back(run.store, args.run_id, wall, cpu),
        "fake": fake_remote.stats(),
        **({"stalls": stalls} if stalls else {}),
    }


def loop_thread_sched() -> tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for a CPU) of the calling thread, from
    the kernel's schedstat; zeros where the kernel does not keep it."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            on_cpu, waiting = f.read().split()[:2]
        return int(on_cpu) / 1e9, int(waiting) / 1e9
    except (OSError, ValueError):
        return 0.0, 0.0


def read_back(store_path: str, run_id: str, wall: float, cpu: float) -> dict[str, Any]:
    """Every bench episode's row and steps, from the store: outcomes, rewards, tool results."""
    from autoenvscaling.tools.rollouts.store import RolloutStore

    with RolloutStore(store_path) as store:
        rows = [
            a
            for a in store.list_attempts(run_id=run_id, role="solver", limit=100_000)
            if a.metadata.get("purpose") == "bench"
        ]
        tool_calls = 0
        answers_seen = 0
        for a in rows:
            steps = [s for s in store.trajectory(a.id).steps if s.tool_name]
            tool_calls += len(steps)
            word = word_of(int(a.task_id.rsplit("-", 1)[1]))
            answers_seen += any(
                (s.tool_args or {}).get("command") == "cat /app/answer.txt"
                and word in (s.tool_output or "")
                for s in steps
            )
    outcomes: dict[str, int] = {}
    for a in rows:
        outcomes[str(a.outcome)] = outcomes.get(str(a.outcome), 0) + 1
    durations = sorted(a.duration_sec or 0.0 for a in rows) or [0.0]
    return {
        "recorded": len(rows),
        "solved": sum(1 for a in rows if a.reward == 1.0),
        "outcomes": outcomes,
        "errors": sum(1 for a in rows if a.outcome in ("error", "timeout", None)),
        "tool_calls": tool_calls,
        "answers_seen": answers_seen,
        "episodes_per_sec": round(len(rows) / wall, 2) if wall else 0.0,
        "tool_calls_per_sec": round(tool_calls / wall, 1) if wall else 0.0,
        "cpu_ms_per_episode": round(1000 * cpu / max(1, len(rows)), 1),
        "episode_p50_sec": round(statistics.median(durations), 2),
        "episode_max_sec": round(durations[-1], 2),
    }


def quiet_logs() -> None:
    """The CLI's logging (cli/main.py): WARNING and up, Harbor's per-trial DEBUG chatter filtered
    out, as in `autoenvscaling run` (formatting it would be CPU the coordinator does not spend)."""
    import logging

    from autoenvscaling.cli.main import HarborLogFilter

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(HarborLogFilter(verbose=False))


# -- the parent: one child per K ----------------------------------------------------------------
def episodes_for(k: int, args: argparse.Namespace) -> int:
    if args.episodes:
        return args.episodes
    return max(2, k) if args.quick else max(8, 4 * k)


def child_argv(k: int, args: argparse.Namespace, out: Path, root: Path) -> list[str]:
    return [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        "--k",
        str(k),
        "--episodes",
        str(episodes_for(k, args)),
        "--calls",
        str(args.calls),
        "--exec-ms",
        str(args.exec_ms),
        "--start-ms",
        str(args.start_ms),
        "--transfer-ms",
        str(args.transfer_ms),
        "--jitter",
        str(args.jitter),
        "--seed",
        str(args.seed),
        "--timeout-per-k",
        str(args.timeout_per_k),
        "--json",
        str(out),
        "--keep",
        str(root),
        *(["--stalls"] if args.stalls else []),
        *(["--store", args.store] if args.store else []),
        # A run of its own per K and sweep: a shared store's finished episodes are never rerun.
        "--run-id",
        f"{RUN_ID}-{args.started}-k{k}" if args.store else RUN_ID,
        "--processes",
        str(args.processes),
    ]


def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| K in flight | episodes | solved / recorded | errors | wall (s) | episodes/s | "
        "tool calls/s | scaling vs K=1 | CPU ms / episode | loop thread on / waiting for a CPU (s) | "
        "loop lag p50 / p99 / max (ms) | "
        "peak RSS (MB) | RSS / episode in flight (MB) | threads / fds at peak |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    )
    one = next((r["episodes_per_sec"] for r in results if r["k"] == 1), None)
    lines = []
    for r in results:
        if "error" in r:
            why = " ".join(r["error"].replace("|", " ").split())[-120:]
            lines.append(f"| {r['k']} | - | - | {why} |" + " - |" * 10)
            continue
        ratio = r["episodes_per_sec"] / one if one else 0.0
        scale = f"{ratio:.1f}x ({ratio / r['k']:.0%} of {r['k']}x)" if one else "-"
        note = " (timed out)" if r["timed_out"] else ""
        lines.append(
            f"| {r['k']} | {r['episodes']}{note} | {r['solved']} / {r['recorded']} | "
            f"{r['errors'] + r['crash_count']} | {r['wall_sec']} | {r['episodes_per_sec']} | "
            f"{r['tool_calls_per_sec']} | {scale} | {r['cpu_ms_per_episode']} | "
            f"{r['loop_on_cpu_sec']} / {r['loop_waiting_for_cpu_sec']} | "
            f"{r['lag_p50_ms']} / {r['lag_p99_ms']} / {r['lag_max_ms']} | {r['peak_rss_mb']} | "
            f"{r['rss_per_episode_mb']} | {r['peak_threads']} / {r['peak_fds']} |"
        )
    return head + "\n".join(lines) + "\n"


def parent(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.keep:
        return each_k(args, Path(args.keep))
    with tempfile.TemporaryDirectory(prefix="aes-bench-conc-") as scratch:
        return each_k(args, Path(scratch))


def each_k(args: argparse.Namespace, keep: Path) -> list[dict[str, Any]]:
    results = []
    for k in args.k:
        root = keep / f"k{k}"
        root.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        outs = [root / f"result-{i}.json" for i in range(args.processes)]
        children = [
            subprocess.Popen(
                [*child_argv(k, args, out, root), "--process", str(i)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i, out in enumerate(outs)
        ]
        try:
            errors = [c.communicate(timeout=args.timeout_per_k + 120)[1] for c in children]
            if any(
                c.returncode != 0 or not o.exists() for c, o in zip(children, outs, strict=True)
            ):
                codes = [c.returncode for c in children]
                results.append({"k": k, "error": f"exit {codes}: {errors[-1][-1500:]}"})
            else:
                results.append(combined([json.loads(o.read_text()) for o in outs]))
        except subprocess.TimeoutExpired:
            for c in children:
                c.kill()
            results.append({"k": k, "error": f"child past {args.timeout_per_k + 120} s"})
        print(f"K={k}: {time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
    return results


def combined(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One row for N coordinator processes: episodes counted once (each read back every row),
    CPU summed, wall and lag the worst process's, RSS per episode over all K·N in flight."""
    if len(parts) == 1:
        return parts[0]
    worst = max(parts, key=lambda r: r["wall_sec"])
    cpu = sum(r["cpu_sec"] for r in parts)
    row = {**worst, "processes": len(parts), "cpu_sec": round(cpu, 2)}
    row["cpu_ms_per_episode"] = round(1000 * cpu / max(1, worst["recorded"]), 1)
    for key in ("loop_on_cpu_sec", "loop_waiting_for_cpu_sec", "peak_rss_mb"):
        row[key] = round(sum(r[key] for r in parts), 2)
    for key in ("lag_p50_ms", "lag_p99_ms", "lag_max_ms", "peak_threads", "peak_fds"):
        row[key] = max(r[key] for r in parts)
    row["rss_per_episode_mb"] = round(sum(r["rss_per_episode_mb"] for r in parts) / len(parts), 2)
    row["crash_count"] = sum(r["crash_count"] for r in parts)
    row["per_process"] = parts
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument(
        "--k",
        default=",".join(map(str, DEFAULT_KS)),
        type=lambda s: [int(x) for x in s.split(",")],
        help="episodes in flight",
    )
    ap.add_argument("--episodes", type=int, default=0, help="per K (default 4K, min 8; quick: K)")
    ap.add_argument("--calls", type=int, default=6, help="tool calls per episode")
    ap.add_argument("--exec-ms", type=float, default=120.0, help="one exec's round trip")
    ap.add_argument("--start-ms", type=float, default=400.0, help="starting a sandbox")
    ap.add_argument("--transfer-ms", type=float, default=150.0, help="one upload or download")
    ap.add_argument("--jitter", type=float, default=0.5, help="+- fraction of each wait")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="one wave per K (K episodes)")
    ap.add_argument("--timeout-per-k", type=float, default=240.0, help="wall-time bound per K")
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--keep", help="leave each K's tasks, run folder and store here")
    ap.add_argument("--stalls", action="store_true", help="sample where the loop stalls (JSON)")
    ap.add_argument("--store", help="a PostgreSQL URL for the run's store (default: SQLite)")
    ap.add_argument(
        "--processes", type=int, default=1, help="coordinator processes per K (needs --store)"
    )
    ap.add_argument("--process", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--run-id", default=RUN_ID, help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("HARBOR_TELEMETRY", "0")
    if args.processes > 1 and not args.store:
        ap.error("--processes above 1 share one PostgreSQL store: give --store postgresql://...")
    if args.child:
        quiet_logs()
        result = asyncio.run(run_k(args, Path(args.keep)))
        args.json.write_text(json.dumps(result, indent=1))
        return
    load = os.getloadavg()[0]
    args.started = int(time.time())
    results = parent(args)
    summary = {
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end",
        "command": " ".join(sys.argv),
        "latency": {
            "exec_ms": args.exec_ms,
            "start_ms": args.start_ms,
            "transfer_ms": args.transfer_ms,
            "jitter": args.jitter,
        },
        "calls": args.calls,
        "results": results,
    }
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    print(table(results))


if __name__ == "__main__":
    main()
