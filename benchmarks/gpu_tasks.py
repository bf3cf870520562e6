"""GPU check: the GPU tasks' oracle and nop, run without a container on a machine with a GPU.

    python3 benchmarks/gpu_tasks.py                    # every task under tasks/gpu/
    python3 benchmarks/gpu_tasks.py tasks/gpu/rmsnorm-triton --out gpu_tasks.json

For a machine with an NVIDIA GPU and a python3 that has PyTorch and Triton, but no container
engine (the gate's `needs a GPU` verdict says how to judge these tasks in containers). Each task
gets two fresh copies of its inputs: `oracle` runs solution/solve.sh then tests/test.sh, `nop`
runs tests/test.sh alone. The container paths are moved into the copy through the tasks'
APP_DIR, TESTS_DIR and LOGS_DIR variables; the Dockerfile's `COPY SRC /app/...` lines say what
goes where (nothing else of the Dockerfile runs: the machine's python3 stands in for its image).
Prints one JSON object (rewards, seconds, the tail of each verifier's output); standard library
only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COPY = re.compile(r"^\s*COPY\s+(\S+)\s+/app(/\S*)?\s*$", re.MULTILINE)


def stage(task: Path, root: Path) -> dict[str, str]:
    """The task's /app, tests and solution under `root`; the variables that point at them."""
    app = root / "app"
    app.mkdir(parents=True)
    for src, dest in COPY.findall((task / "environment" / "Dockerfile").read_text()):
        target = app / dest.strip("/") if dest.strip("/") else app
        source = task / "environment" / src
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(source, target)
    shutil.copytree(task / "tests", root / "tests")
    shutil.copytree(task / "solution", root / "solution")
    (root / "logs" / "verifier").mkdir(parents=True)
    return {
        "APP_DIR": str(app),
        "TESTS_DIR": str(root / "tests"),
        "LOGS_DIR": str(root / "logs" / "verifier"),
    }


def sh(script: Path, env: dict[str, str], cwd: Path, timeout: int) -> tuple[int, str, float]:
    start = time.monotonic()
    try:
        p = subprocess.run(
            ["bash", str(script)], cwd=cwd, env={**os.environ, **env},
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        return p.returncode, (p.stdout + p.stderr)[-3000:], time.monotonic() - start
    except subprocess.TimeoutExpired:
        return 124, f"timed out after {timeout}s", time.monotonic() - start


def verifier_user() -> tuple[str, dict[str, str]]:
    """Who the tasks' checkers run the agent's code as here, and the variables that say so: as
    root they drop to `nobody`, unless `nobody` cannot run this machine's python3 with torch."""
    if os.geteuid() != 0:
        return "the caller", {}
    python = shutil.which("python3") or sys.executable
    try:
        probe = subprocess.run(
            [python, "-c", "import torch"], user="nobody", capture_output=True, timeout=300,
            cwd="/", env={**os.environ, "HOME": "/tmp"},
        )  # fmt: skip
        if probe.returncode == 0:
            return "nobody", {}
        why = probe.stderr.decode(errors="replace").strip().splitlines()[-1:]
    except (OSError, KeyError, subprocess.SubprocessError) as exc:
        why = [str(exc)]
    return f"root (nobody cannot import torch: {' '.join(why)})", {"VERIFIER_SAME_USER": "1"}


def run_mode(task: Path, mode: str, timeout: int, extra: dict[str, str]) -> dict[str, object]:
    root = Path(tempfile.mkdtemp(prefix=f"gpu-{task.name}-{mode}-"))
    try:
        env = {**stage(task, root), **extra}
        out: dict[str, object] = {}
        if mode == "oracle":
            rc, tail, secs = sh(root / "solution" / "solve.sh", env, Path(env["APP_DIR"]), timeout)
            out.update(solve_rc=rc, solve_seconds=round(secs, 1), solve_tail=tail[-800:])
        rc, tail, secs = sh(root / "tests" / "test.sh", env, Path(env["APP_DIR"]), timeout)
        reward_file = Path(env["LOGS_DIR"]) / "reward.txt"
        reward = reward_file.read_text().strip() if reward_file.exists() else None
        out.update(
            reward=float(reward) if reward else None,
            test_rc=rc,
            test_seconds=round(secs, 1),
            test_tail=tail,
        )
        return out
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("tasks", nargs="*", type=Path, help="task folders (default: tasks/gpu/*)")
    parser.add_argument("--timeout", type=int, default=540, help="seconds per script")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    tasks = args.tasks or sorted(p for p in (REPO / "tasks" / "gpu").iterdir() if p.is_dir())
    report: dict[str, object] = {"python": sys.executable, "tasks": {}}
    try:
        gpu = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        report["gpu"] = gpu.stdout.strip() or gpu.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as exc:
        report["gpu"] = f"nvidia-smi failed: {exc}"
    report["verifier_user"], extra = verifier_user()
    results = {
        task.name: {
            mode: run_mode(task.resolve(), mode, args.timeout, extra) for mode in ("oracle", "nop")
        }
        for task in tasks
    }
    report["tasks"] = results
    report["ok"] = all(
        r["oracle"]["reward"] == 1.0 and r["nop"]["reward"] == 0.0 for r in results.values()
    )
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
