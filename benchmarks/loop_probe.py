"""Probes for an asyncio coordinator under load (benchmarks/bench_concurrency.py): the event loop's
lag, the process's peak RSS, threads and open files, and where the loop stalls."""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

OURS = str(Path(__file__).resolve().parents[1])  # this checkout: the package and the benchmarks


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


class Probe:
    """Event-loop lag (a 10 ms sleep's overshoot) and the process's peak RSS, threads, files."""

    def __init__(self, period: float = 0.010) -> None:
        self.period = period
        self.lags_ms: list[float] = []
        self.peak_rss_mb = rss_mb()
        self.peak_threads = 0
        self.peak_fds = 0
        self.sampler: StallSampler | None = None

    async def run(self) -> None:
        import psutil

        me = psutil.Process()
        n = 0
        while True:
            t0 = time.perf_counter()
            await asyncio.sleep(self.period)
            self.lags_ms.append((time.perf_counter() - t0 - self.period) * 1000)
            if self.sampler is not None:
                self.sampler.tick = time.monotonic()
            self.peak_rss_mb = max(self.peak_rss_mb, rss_mb())
            n += 1
            if n % 10 == 0:
                self.peak_threads = max(self.peak_threads, me.num_threads())
                self.peak_fds = max(self.peak_fds, me.num_fds())

    def lag(self) -> dict[str, float]:
        lags = sorted(self.lags_ms) or [0.0]
        return {
            "lag_p50_ms": round(statistics.median(lags), 2),
            "lag_p99_ms": round(lags[min(len(lags) - 1, int(0.99 * len(lags)))], 2),
            "lag_max_ms": round(lags[-1], 2),
            "lag_samples": len(self.lags_ms),
        }


class StallSampler:
    """Where the loop stalls: a thread that, while the probe has not ticked for `after` s,
    samples the loop thread's stack every `every` s and counts the innermost frame and the
    innermost frame of this project's code (`--stalls`; a diagnostic, off in the table's runs)."""

    def __init__(self, after: float = 0.05, every: float = 0.005) -> None:

        self.after, self.every = after, every
        self.loop_thread = threading.get_ident()
        self.tick = time.monotonic()
        self.samples = 0
        self.inner: dict[str, int] = {}
        self.ours: dict[str, int] = {}
        self.harbor: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(self.every):
            if time.monotonic() - self.tick < self.after:
                continue
            frame = sys._current_frames().get(self.loop_thread)
            self.samples += 1
            first, seen_harbor = True, False
            while frame is not None:
                code = frame.f_code
                where = f"{_short(code.co_filename)}:{frame.f_lineno} {code.co_name}"
                if first:
                    self.inner[where] = self.inner.get(where, 0) + 1
                    first = False
                if not seen_harbor and "site-packages/harbor/" in code.co_filename:
                    self.harbor[where] = self.harbor.get(where, 0) + 1
                    seen_harbor = True
                name = code.co_filename
                if name.startswith(OURS) and "site-packages" not in name:
                    self.ours[where] = self.ours.get(where, 0) + 1
                    break
                frame = frame.f_back

    def report(self) -> dict[str, Any]:
        def top(d: dict[str, int]) -> list[list[Any]]:
            return [[k, v] for k, v in sorted(d.items(), key=lambda kv: -kv[1])[:10]]

        return {
            "stall_samples": self.samples,
            "stall_ms_each": self.every * 1000,
            "innermost": top(self.inner),
            "project_frame": top(self.ours),
            "harbor_frame": top(self.harbor),
        }


def _short(path: str) -> str:
    for marker in ("site-packages/", f"{OURS}/", "lib/python3.12/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path
