"""What gVisor costs: podman sandboxes under runc against runsc (tools/sandbox/runtimes.py),
side by side in one process, the runtimes alternating round by round so a loaded machine's
drift falls on both.

    .venv/bin/python benchmarks/bench_runtimes.py [--rounds 5] [--execs 10] [--trial tasks/seed/X]
        [--episode tasks/seed/X] [--json]

Per round and runtime: sandbox start (`ContainerSandbox.start` on the offline base, until the
container runs), the exec round trip (median of `--execs` execs of `true` in that sandbox, the
engine's exec API), a process start inside (`/bin/true` run 100 times in one shell, timed inside),
removal, and with `--trial` one oracle trial of that task (Harbor, the separate verifier: two
containers), and with `--episode` one GRPO episode of that task as TRL drives it
(training/grpo/episode_env.py: a fresh sandbox, five tool calls of `ls`, the reference solution
as one more, then the task's verifier in the episode's sandbox; the model's tokens are left out,
they cost the same under either runtime). Reports medians and the 1-minute load average seen. The gate over the seed pool
(~20-45 min a runtime here) is not in it: `AUTOENVSCALING_SANDBOX_RUNTIME=runsc autoenvscaling
validate tasks/seed/*/ --skip calibrate --pool tasks/seed --json` (benchmarks/RESULTS.md).
Needs podman, the base image and runsc (`make setup`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HARBOR_TELEMETRY", "0")

from autoenvscaling.tools.sandbox.bases import require_base  # noqa: E402
from autoenvscaling.tools.sandbox.container import ContainerSandbox  # noqa: E402
from autoenvscaling.tools.settings import get_settings  # noqa: E402

RUNTIMES = ("runc", "runsc")
SPAWNS = 100
#: Nanoseconds for SPAWNS starts of /bin/true, timed inside the sandbox.
SPAWN = (
    f"s=$(date +%s%N); for i in $(seq {SPAWNS}); do /bin/true; done; echo $(( $(date +%s%N) - s ))"
)


def use(runtime: str) -> None:
    os.environ["AUTOENVSCALING_SANDBOX_RUNTIME"] = runtime
    get_settings.cache_clear()


def grpo_episode(task: Path) -> float:
    """One GRPO episode's sandbox side on `task`, as TRL's environment calls it; its reward."""
    from autoenvscaling.training.grpo.episode_env import EpisodeConfig, EventLoop, TaskEpisode
    from autoenvscaling.training.grpo.sandboxes import task_starter

    solve = (task / "solution" / "solve.sh").read_text()
    loop = EventLoop()
    try:
        episode = TaskEpisode(loop, task_starter("podman"), EpisodeConfig())
        episode.reset(task_dir=str(task))
        for _ in range(5):
            episode.run("ls -la")
        episode.run(f"bash <<'AES_SOLVE'\n{solve}\nAES_SOLVE")
        record = loop.run(episode._finish())
    finally:
        loop.stop()
    return record.reward if record.reward is not None else -1.0


async def one_round(
    runtime: str, image: str, execs: int, trial: Path | None, task: Path | None = None
) -> dict[str, float]:
    use(runtime)
    load = os.getloadavg()[0]
    started = time.monotonic()
    box = await ContainerSandbox.start(image)
    start_sec = time.monotonic() - started
    assert box.ref.handle.get("runtime", "runc") == runtime, box.ref.handle
    try:
        await box.exec("true")  # the first exec warms the engine's exec path
        rtts = []
        for _ in range(execs):
            t = time.monotonic()
            out = await box.exec("true")
            rtts.append(time.monotonic() - t)
            assert out.exit_code == 0, out
        spawn = await box.exec(SPAWN, cwd="/")
        spawn_ms = int(spawn.stdout.split()[-1]) / 1e6 / SPAWNS
    finally:
        t = time.monotonic()
        await box.close()
        close_sec = time.monotonic() - t
    row = {
        "load": load,
        "start_sec": start_sec,
        "exec_ms": statistics.median(rtts) * 1000,
        "spawn_ms": spawn_ms,
        "close_sec": close_sec,
    }
    if trial is not None:
        from autoenvscaling.tools.trials.trial import run_trial

        t = time.monotonic()
        outcome = await run_trial(trial, agent="oracle")
        row["trial_sec"] = time.monotonic() - t
        row["trial_reward"] = outcome.reward if outcome.reward is not None else -1.0
    if task is not None:
        t = time.monotonic()
        row["episode_reward"] = await asyncio.to_thread(grpo_episode, task)
        row["episode_sec"] = time.monotonic() - t
    return row


async def main(
    rounds: int, execs: int, trial: Path | None, episode: Path | None = None
) -> dict[str, list[dict[str, float]]]:
    image = require_base("podman")
    rows: dict[str, list[dict[str, float]]] = {name: [] for name in RUNTIMES}
    for i in range(rounds):
        order = RUNTIMES if i % 2 == 0 else RUNTIMES[::-1]
        for runtime in order:
            rows[runtime].append(await one_round(runtime, image, execs, trial, episode))
            print(f"round {i + 1} {runtime}: {rows[runtime][-1]}", flush=True)
    return rows


def table(rows: dict[str, list[dict[str, float]]]) -> str:
    keys = ("start_sec", "exec_ms", "spawn_ms", "close_sec", "trial_sec", "episode_sec")
    keys = [k for k in keys if k in rows["runc"][0]]
    lines = ["| measure (median) | runc | runsc | runsc / runc |", "|---|---|---|---|"]
    for key in keys:
        a = statistics.median(r[key] for r in rows["runc"])
        b = statistics.median(r[key] for r in rows["runsc"])
        lines.append(f"| {key} | {a:.3g} | {b:.3g} | {b / a:.2f}x |")
    loads = [r["load"] for rs in rows.values() for r in rs]
    lines.append(f"\n{len(rows['runc'])} rounds each; 1-min load {min(loads):.1f}-{max(loads):.1f}")
    if "trial_reward" in rows["runc"][0]:
        rewards = {k: [r["trial_reward"] for r in v] for k, v in rows.items()}
        lines.append(f"oracle rewards: {rewards}")
    if "episode_reward" in rows["runc"][0]:
        rewards = {k: [r["episode_reward"] for r in v] for k, v in rows.items()}
        lines.append(f"episode rewards: {rewards}")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--execs", type=int, default=10)
    parser.add_argument("--trial", type=Path, default=None)
    parser.add_argument("--episode", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(main(args.rounds, args.execs, args.trial, args.episode))
    print(json.dumps(result, indent=1) if args.json else table(result))
