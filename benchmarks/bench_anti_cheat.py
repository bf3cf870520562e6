"""The `anti_cheat` stage's wall time per task over the seed pool: before (the stage as a git ref
had it, default `main`) against now (audit with leak search and near misses, combined exploit
probes with, by default, the tamperer and interpreter wrappers on every separate-verifier task),
one task at a time, each stage's own trials concurrent as in the gate.

    .venv/bin/python benchmarks/bench_anti_cheat.py [--tasks tasks/seed] [--ref main] [--json]

The baseline is the old anti-cheat stage + `probes.py` read with `git show REF:...` into a
temporary package; everything they import is today's. Images are built (and cached) before any
timing, so both sides measure trials, not builds. Needs the default sandbox backend.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import get_args

os.environ.setdefault("HARBOR_TELEMETRY", "0")

from autoenvscaling.tools.gate import GateConfig, run_stage  # noqa: E402
from autoenvscaling.tools.gate.config import IsolationProbe  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OLD_PACKAGE = "aes_bench_baseline"
#: Modules a baseline from before the tools/ sub-packages imports, at their paths today.
MOVED = {
    "autoenvscaling.tools.gate.cheat_agent": "autoenvscaling.tools.gate.anti_cheat.cheat_agent",
    "autoenvscaling.tools.gate.exploits": "autoenvscaling.tools.gate.anti_cheat.exploits",
    "autoenvscaling.tools.gate.audit": "autoenvscaling.tools.gate.anti_cheat.audit",
    "autoenvscaling.tools.task_format": "autoenvscaling.tools.tasks.format",
    "autoenvscaling.tools.trials": "autoenvscaling.tools.trials.trial",
    "autoenvscaling.tools.verifier_protocol": "autoenvscaling.tools.trials.verifier",
}
_MOVED = re.compile("(?:" + "|".join(re.escape(old) for old in MOVED) + r")(?![\w.])")


def git_show(ref: str, path: str) -> str:
    return subprocess.run(
        ["git", "show", f"{ref}:{path}"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout


def git_ls(ref: str, path: str) -> bool:
    return bool(
        subprocess.run(
            ["git", "ls-tree", "--name-only", ref, path], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    )


def baseline_config(ref: str, config: GateConfig) -> GateConfig:
    """`config` with the isolation probes off, spelt the way `ref`'s stage reads them: before
    they had modes they were switches (bool), off by default."""
    modes = "IsolationProbe" in git_show(ref, "tools/gate/config.py")
    off = "off" if modes else False
    return config.model_copy(update={"tamperer_probe": off, "tamper_interpreters": off})


def load_baseline(ref: str) -> object:
    """The `anti_cheat` coroutine function of `ref`, importable as a package of its own."""
    root = Path(tempfile.mkdtemp(prefix="aes-bench-baseline-"))
    package = root / OLD_PACKAGE
    package.mkdir()
    (package / "__init__.py").write_text("")
    # tools/gate/anti_cheat/{stage,probes}.py since the gate's anti-cheat modules got their
    # folder; tools/gate/{anti_cheat,probes}.py before.
    nested = git_ls(ref, "tools/gate/anti_cheat/stage.py")
    for name in ("anti_cheat", "probes"):
        path = f"tools/gate/anti_cheat/{'stage' if name == 'anti_cheat' else name}.py"
        text = git_show(ref, path if nested else f"tools/gate/{name}.py")
        for probes in (
            "autoenvscaling.tools.gate.anti_cheat.probes",
            "autoenvscaling.tools.gate.probes",
        ):
            text = text.replace(probes, f"{OLD_PACKAGE}.probes")
        text = _MOVED.sub(lambda m: MOVED[m.group(0)], text)
        (package / f"{name}.py").write_text(text)
    sys.path.insert(0, str(root))
    return importlib.import_module(f"{OLD_PACKAGE}.anti_cheat").anti_cheat


async def timed(fn: object, task: Path, config: GateConfig) -> tuple[float, bool, str]:
    started = time.perf_counter()
    result = await fn(task, config, {})  # type: ignore[operator]
    return time.perf_counter() - started, result.passed, result.reason


async def main(args: argparse.Namespace) -> dict[str, object]:
    tasks = sorted(p for p in args.tasks.iterdir() if (p / "task.toml").exists())
    config = GateConfig(
        trial_concurrency=args.trials,
        tamperer_probe=args.tamperer,
        tamper_interpreters=args.interpreters,
    )
    old_config = baseline_config(args.ref, config)
    old = load_baseline(args.ref)
    from autoenvscaling.tools.gate.anti_cheat.stage import anti_cheat as new

    rows = []
    for task in tasks:
        built = await run_stage("build", task, config)
        if not built.passed:
            rows.append({"task": task.name, "error": built.reason})
            continue
        before, ok_before, _ = await timed(old, task, old_config)
        after, ok_after, reason = await timed(new, task, config)
        rows.append(
            {
                "task": task.name,
                "before_sec": round(before, 2),
                "after_sec": round(after, 2),
                "ratio": round(after / before, 2),
                "admitted_before": ok_before,
                "admitted_after": ok_after,
                "reason_after": reason[:200],
            }
        )
        print(
            f"{task.name:28s} before {before:6.2f}s  after {after:6.2f}s  "
            f"x{after / before:4.2f}  {'pass' if ok_after else 'REJECT: ' + reason[:80]}",
            flush=True,
        )
    timed_rows = [r for r in rows if "ratio" in r]
    total_before = sum(r["before_sec"] for r in timed_rows)  # type: ignore[misc]
    total_after = sum(r["after_sec"] for r in timed_rows)  # type: ignore[misc]
    summary = {
        "tasks": len(timed_rows),
        "total_before_sec": round(total_before, 2),
        "total_after_sec": round(total_after, 2),
        "ratio_total": round(total_after / total_before, 2) if total_before else None,
        "ratio_median": statistics.median(r["ratio"] for r in timed_rows) if timed_rows else None,
        "rejected_after": [r["task"] for r in timed_rows if not r["admitted_after"]],
        "trial_concurrency": args.trials,
        "tamperer_probe": args.tamperer,
        "tamper_interpreters": args.interpreters,
        "ref": args.ref,
    }
    print(json.dumps(summary, indent=1))
    return {"rows": rows, "summary": summary}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=Path, default=REPO / "tasks" / "seed")
    parser.add_argument("--ref", default="main", help="git ref of the baseline stage")
    parser.add_argument("--trials", type=int, default=4, help="trials in flight at once")
    modes = list(get_args(IsolationProbe))
    parser.add_argument("--tamperer", choices=modes, default=GateConfig().tamperer_probe)
    parser.add_argument("--interpreters", choices=modes, default=GateConfig().tamper_interpreters)
    parser.add_argument("--json", type=Path, help="also write the rows and summary here")
    ns = parser.parse_args()
    out = asyncio.run(main(ns))
    if ns.json:
        ns.json.write_text(json.dumps(out, indent=1))
