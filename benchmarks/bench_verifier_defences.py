"""What the verifier-side defences of issue #28 cost per trial, on the default engine.

- work copy: the copy of a work folder out of a container, the archive read member by member
  (links and files past the cap skipped and named) against the old all-or-nothing extraction
  (`git show REF:tools/sandbox/archives.py`), on the same container, median of `--repeat`;
- the end of the tests' processes before the reward is read (`quiesce.kill_container_processes`
  on a container with `--leftovers` processes running);
- the GRPO episode's question whether its sandbox still runs (one engine inspect).

    .venv/bin/python benchmarks/bench_verifier_defences.py [--ref 21cbf70] [--json OUT]

The gate's added probes (`program` in a trial of its own, `git` and `customize` in the combined
exploit trial) are timed by bench_anti_cheat.py (--ref).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

# A work folder like a solved task's: a venv-like tree of small files, one absolute link, 40 MB.
MAKE_WORK = """set -e
mkdir -p /app/venv/bin /app/src
for i in $(seq 1 2000); do echo "line $i" > /app/src/f$i.py; done
head -c 40M /dev/urandom > /app/data.bin
"""
# What a venv leaves: the old copy refused the whole folder for it.
ADD_LINK = "ln -sf /usr/bin/python3 /app/venv/bin/python"


def _old_archives(ref: str) -> Any:
    """The module as `ref` had it, loaded under another name (today's imports)."""
    text = subprocess.run(
        ["git", "show", f"{ref}:tools/sandbox/archives.py"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "old_archives.py"
    path.write_text(text)
    spec = importlib.util.spec_from_file_location("aes_old_archives", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def _timed(repeat: int, make: Any) -> list[float]:
    out = []
    for _ in range(repeat):
        started = time.perf_counter()
        await make()
        out.append(time.perf_counter() - started)
    return out


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from autoenvscaling.tools.sandbox import archives
    from autoenvscaling.tools.sandbox.container import start_workspace
    from autoenvscaling.tools.sandbox.engine import call, client
    from autoenvscaling.tools.sandbox.quiesce import kill_container_processes

    old = _old_archives(args.ref)
    box = await start_workspace()
    rows: dict[str, Any] = {}
    try:
        made = await box.exec(MAKE_WORK, cwd="/", user="root", timeout_sec=300)
        assert made.exit_code == 0, made.stderr
        target = Path(tempfile.mkdtemp(prefix="aes-bench-copy-"))

        async def copy_new() -> None:
            shutil.rmtree(target, ignore_errors=True)
            rows["work_copy_skipped"] = await archives.download(box, "/app", target)

        async def copy_old() -> None:
            shutil.rmtree(target, ignore_errors=True)
            try:
                await old.download(box, "/app", target)
                rows["old_copy_result"] = "copied"
            except Exception as exc:  # noqa: BLE001 - the old copy refuses the link: recorded
                rows["old_copy_result"] = f"{type(exc).__name__}: {str(exc)[:120]}"

        # Both copy a clean folder; then the old one meets the link.
        for when in ("clean", "with_link"):
            if when == "with_link":
                await box.exec(ADD_LINK, cwd="/", user="root")
            new_times = await _timed(args.repeat, copy_new)
            old_times = await _timed(args.repeat, copy_old)
            rows[f"work_copy_new_s_{when}"] = round(statistics.median(new_times), 3)
            rows[f"work_copy_old_s_{when}"] = round(statistics.median(old_times), 3)
            rows[f"old_copy_{when}"] = rows.pop("old_copy_result")

        # Leftover processes of the tests, ended from the host before the reward is read.
        kills = []
        for _ in range(args.repeat):
            spawn = " ".join(["sleep 600 &"] * args.leftovers)
            await box.exec(f"{spawn} true", cwd="/", user="root")
            api = client(box.backend).api
            state = (await call(api.inspect_container, box.container_id))["State"]
            started = time.perf_counter()
            killed = await asyncio.to_thread(
                kill_container_processes, box.ref.handle.get("pidns"), int(state["Pid"])
            )
            kills.append(time.perf_counter() - started)
            rows["processes_killed"] = killed
        rows["end_processes_s"] = round(statistics.median(kills), 4)

        inspects = []
        for _ in range(args.repeat * 5):
            started = time.perf_counter()
            await call(api.inspect_container, box.container_id)
            inspects.append(time.perf_counter() - started)
        rows["episode_stopped_check_s"] = round(statistics.median(inspects), 4)
        shutil.rmtree(target, ignore_errors=True)
    finally:
        await box.close()
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ref", default="21cbf70", help="git ref of the old work copy")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--leftovers", type=int, default=5, help="processes the tests leave")
    parser.add_argument("--json", type=Path, help="also write the numbers here")
    parsed = parser.parse_args()
    result = asyncio.run(main(parsed))
    print(json.dumps(result, indent=1))
    if parsed.json:
        parsed.json.write_text(json.dumps(result, indent=1))
    sys.exit(0)
