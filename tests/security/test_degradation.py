"""Degradation: an agent cannot make the host pay for what it leaves behind.

- A sparse 2 GB file under /logs/agent (Harbor downloads that folder after every agent phase)
  must not grow this process's memory: downloads stream, they are never buffered whole.
- The container's writable layer has a size cap that holds (the task's `storage_mb`).
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tests.security.conftest import BACKEND, agent_log, describe, run_all, write_task

pytestmark = [pytest.mark.timeout(900)]

TEST_SH = """\
    #!/bin/bash
    mkdir -p /logs/verifier
    echo 0.0 > /logs/verifier/reward.txt
    """
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\n"
RSS_GROWTH_LIMIT = 300 * 1024 * 1024


def _rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc/self/status")


class PeakRss:
    """Samples this process's resident memory every 20 ms while it is open."""

    def __init__(self) -> None:
        self.peak = self.start = _rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def test_a_sparse_2gb_log_does_not_grow_the_host_process(engine_ready, tmp_path):
    task = write_task(
        tmp_path,
        "sparse-log",
        dockerfile=DOCKERFILE,
        test_sh=TEST_SH,
        solve="""\
            #!/bin/bash
            truncate -s 2G /logs/agent/huge.log && ls -ls /logs/agent/huge.log && echo probe-done
            """,
    )
    with PeakRss() as rss:
        outcome = run_all({"sparse": (task, BACKEND)}, tmp_path / "trials")["sparse"]
    assert "probe-done" in agent_log(outcome), describe(outcome)
    growth = rss.peak - rss.start
    assert growth < RSS_GROWTH_LIMIT, f"RSS grew by {growth / 2**20:.0f} MiB"


def test_the_writable_layer_cap_holds(engine_ready, tmp_path):
    """A task capped at 256 MB (`storage_mb`) that writes 1 GB into its writable layer is
    stopped before it gets there."""
    task = write_task(
        tmp_path,
        "fill-disk",
        dockerfile=DOCKERFILE,
        test_sh=TEST_SH,
        environment_toml="storage_mb = 256\n",
        solve="""\
            #!/bin/bash
            for i in $(seq 1 16); do
              head -c 64M /dev/zero > /app/fill-$i 2>/dev/null || break
              sleep 0.3
            done
            echo "WROTE=$(du -sm /app | cut -f1)"; echo probe-done
            """,
    )
    outcome = run_all({"fill": (task, BACKEND)}, tmp_path / "trials")["fill"]
    log = agent_log(outcome)
    wrote = next((int(x.split("=")[1]) for x in log.split() if x.startswith("WROTE=")), None)
    assert wrote is None or wrote < 1024, describe(outcome)
    assert "probe-done" not in log or (wrote or 0) < 512, describe(outcome)
