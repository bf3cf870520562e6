"""The engine under the concurrency the project itself creates, for a long while (issue 38).

    nice -n 10 .venv/bin/python benchmarks/bench_engine_soak.py [--minutes 30] [--workers 3]
        [--json out.json]

- `--workers` processes, each with its own podman service (engine.py), each creating sandboxes
  with a writable-layer cap (ContainerSandbox through `start_workspace`, disk_mb=32), writing 8 MB
  and a file in each, checking `df /` shows the cap, and removing it; every `--restart-every`
  sandboxes a worker stops its service and the next sandbox starts a fresh one;
- beside them one poller runs the podman CLI (`podman ps -a`, `podman images`) about once a
  second, and every ~15 s starts a bare `podman system service` that lives a few seconds: podman
  processes starting and exiting at any moment, each binding and unbinding the overlay home.

Every engine call goes through the watchdog (engine.ENGINE_CALL_SEC); a CLI call has the same
bound. It reports sandboxes created and removed, wedges (calls that did not answer within the
bound), other errors, and at the end (all workers gone) the layers left incomplete, hidden mounts,
our layer filesystems left mounted and loop devices left bound: as JSON and one line.

Needs root, podman and the base image (`make bases`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

os.environ.setdefault("HARBOR_TELEMETRY", "0")

from autoenvscaling.tools.sandbox import engine, engine_health  # noqa: E402
from autoenvscaling.tools.sandbox.base import SandboxLimits  # noqa: E402
from autoenvscaling.tools.sandbox.cleanup import OWNER_LABEL, owner  # noqa: E402
from autoenvscaling.tools.sandbox.container import start_workspace  # noqa: E402

DISK_MB = 32
LIMITS = SandboxLimits(memory_mb=256, pids=64, disk_mb=DISK_MB)


async def worker(deadline: float, restart_every: int) -> dict[str, Any]:
    """One process's sandboxes until `deadline`; its counts."""
    created = removed = restarts = wedges = 0
    errors: Counter[str] = Counter()
    wedge_messages: list[str] = []
    cycle: list[float] = []
    uncapped = 0
    while time.time() < deadline:
        started = time.monotonic()
        try:
            box = await start_workspace(limits=LIMITS)
            created += 1
            try:
                out = await box.exec(
                    "dd if=/dev/zero of=/tmp/fill bs=1M count=8 status=none && "
                    "echo ok > /workspace/mark && df -k / | tail -1",
                    timeout_sec=60,
                )
                if not box.ref.handle["layer_cap"].startswith("ext4") or (
                    int(out.stdout.split()[1]) > DISK_MB * 1024
                ):
                    uncapped += 1
            finally:
                await box.close()
                removed += 1
            cycle.append(time.monotonic() - started)
        except engine.EngineWedgedError as exc:
            wedges += 1
            wedge_messages.append(str(exc)[:600])
        except Exception as exc:  # noqa: BLE001 - counted, the soak goes on
            errors[f"{type(exc).__name__}: {str(exc)[:160]}"] += 1
        if created and created % restart_every == 0:
            await asyncio.to_thread(engine.stop_service)
            restarts += 1
    return {
        "created": created,
        "removed": removed,
        "service_restarts": restarts,
        "wedges": wedges,
        "wedge_messages": wedge_messages[:3],
        "errors": dict(errors),
        "uncapped": uncapped,
        "cycle_s": cycle,
        "owner": owner(),
    }


def poller(deadline: float) -> dict[str, Any]:
    """The podman CLI beside the workers, and bare services started and stopped."""
    argv, env = engine.cli_argv("podman")
    polls = wedges = services = 0
    took: list[float] = []
    n = 0
    with tempfile.TemporaryDirectory(prefix="aes-soak-") as tmp:
        while time.time() < deadline:
            n += 1
            command = ["ps", "-a"] if n % 2 else ["images"]
            started = time.monotonic()
            try:
                subprocess.run(
                    [*argv, *command], env=env, capture_output=True,
                    timeout=engine.ENGINE_CALL_SEC, check=False,
                )  # fmt: skip
                polls += 1
                took.append(time.monotonic() - started)
            except subprocess.TimeoutExpired:
                wedges += 1
            if n % 15 == 0:
                service = subprocess.Popen(
                    [*argv, "system", "service", "--time=0", f"unix://{tmp}/soak-{n}.sock"],
                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )  # fmt: skip
                time.sleep(3)
                service.terminate()
                try:
                    service.wait(engine.ENGINE_CALL_SEC)
                except subprocess.TimeoutExpired:
                    service.kill()
                    wedges += 1
                services += 1
            time.sleep(1)
    return {
        "cli_polls": polls,
        "cli_wedges": wedges,
        "bare_services": services,
        "cli_p50_s": round(statistics.median(took), 3) if took else None,
        "cli_max_s": round(max(took), 3) if took else None,
    }


def _worker_main(deadline: float, restart_every: int, out: Path) -> None:
    out.write_text(json.dumps(asyncio.run(worker(deadline, restart_every))))


def end_state(owners: list[str]) -> dict[str, Any]:
    """What the soak left: read from the kernel and the store, not asked of podman."""
    health = engine_health.read()
    pids = [o.split(":")[1] for o in owners]
    ours = [p for p in engine_health.cap_mounts() if any(f":{pid}:" in p for pid in pids)]
    loops = []
    for backing in Path("/sys/block").glob("loop*/loop/backing_file"):
        try:
            text = backing.read_text()
        except OSError:
            continue
        if any(o in text for o in owners):
            loops.append(f"/dev/{backing.parent.parent.name}")
    api = engine.client("podman").api
    left = [
        c["Id"][:12]
        for c in api.containers(all=True, filters={"label": "autoenvscaling=1"})
        if (c.get("Labels") or {}).get(OWNER_LABEL) in owners
    ]
    return {
        "incomplete_layers": health.incomplete_layers,
        "hidden_mounts": [m.mountpoint for m in health.hidden_mounts],
        "leftover_mounts": ours,
        "leftover_loops": loops,
        "leftover_containers": left,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--restart-every", type=int, default=10, help="sandboxes per service")
    parser.add_argument("--json", type=Path, default=None, help="also write the JSON here")
    parser.add_argument("--worker-out", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--deadline", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker_out is not None:
        _worker_main(args.deadline, args.restart_every, args.worker_out)
        return
    load_start = round(os.getloadavg()[0], 1)
    deadline = time.time() + args.minutes * 60
    with tempfile.TemporaryDirectory(prefix="aes-soak-") as tmp:
        outs = [Path(tmp) / f"worker-{i}.json" for i in range(args.workers)]
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker-out",
                    str(out),
                    "--deadline",
                    str(deadline),
                    "--restart-every",
                    str(args.restart_every),
                ]
            )  # fmt: skip
            for out in outs
        ]
        polled = poller(deadline)
        for proc in procs:
            proc.wait()
        workers: list[dict[str, Any]] = [
            json.loads(o.read_text()) if o.exists() else {"crashed": True} for o in outs
        ]
    time.sleep(2)  # the services' last removals
    owners = [w["owner"] for w in workers if "owner" in w]
    cycles = [c for w in workers for c in w.get("cycle_s", [])]
    result = {
        "minutes": args.minutes,
        "workers": args.workers,
        "sandboxes_created": sum(w.get("created", 0) for w in workers),
        "sandboxes_removed": sum(w.get("removed", 0) for w in workers),
        "service_restarts": sum(w.get("service_restarts", 0) for w in workers),
        "wedges": sum(w.get("wedges", 0) for w in workers) + polled["cli_wedges"],
        "uncapped": sum(w.get("uncapped", 0) for w in workers),
        "errors": [e for w in workers for e in (w.get("errors") or {}).items()],
        "workers_crashed": sum(bool(w.get("crashed")) for w in workers),
        "wedge_messages": [m for w in workers for m in w.get("wedge_messages", [])][:3],
        "cycle_p50_s": round(statistics.median(cycles), 2) if cycles else None,
        "cycle_max_s": round(max(cycles), 2) if cycles else None,
        **polled,
        **end_state(owners),
        "load_start": load_start,
        "load_end": round(os.getloadavg()[0], 1),
    }
    text = json.dumps(result, indent=2)
    if args.json:
        args.json.write_text(text)
    print(text)
    print(
        f"engine soak {args.minutes:g} min, {args.workers} workers: "
        f"{result['sandboxes_created']} sandboxes created, {result['sandboxes_removed']} removed, "
        f"{result['service_restarts']} service restarts, {result['cli_polls']} CLI polls, "
        f"{result['bare_services']} bare services; wedges {result['wedges']}, "
        f"errors {sum(n for _, n in result['errors'])}, incomplete layers "
        f"{len(result['incomplete_layers'])}, hidden mounts {len(result['hidden_mounts'])}, "
        f"leftover mounts {len(result['leftover_mounts'])}, loops {len(result['leftover_loops'])}"
    )


if __name__ == "__main__":
    main()
