"""The GRPO worker's heap trim (training/grpo/heap.py) returns freed heap pages to the kernel."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from autoenvscaling.training.grpo.heap import heap_trimmer

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(heap_trimmer() is None, reason="no glibc malloc_trim in this C library"),
]

# In a fresh process: 128 MB in 64 KB blocks (under glibc's mmap threshold, so on the heap), all
# freed but the last one, which pins the heap's top so glibc cannot shrink it by itself.
FREED_BUT_RESIDENT = textwrap.dedent(
    """
    import os
    from autoenvscaling.training.grpo.heap import heap_trimmer

    def rss():
        return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    trim = heap_trimmer()
    blocks = [bytes(64 * 1024) for _ in range(2048)]
    top = blocks[-1]
    del blocks
    before = rss()
    if trim is not None:
        trim()
    print(before - rss(), len(top))
    """
)


def freed_bytes_returned(env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", FREED_BUT_RESIDENT],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[0])


def test_trimming_returns_the_freed_heap_and_can_be_turned_off():
    assert freed_bytes_returned({}) > 64 * 2**20
    # Off: the same freed megabytes stay resident.
    assert freed_bytes_returned({"AUTOENVSCALING_TRIM_HEAP": "0"}) < 16 * 2**20


def test_the_worker_callback_trims_after_every_pass():
    from autoenvscaling.training.grpo.heap import trim_heap_between_passes

    callback = trim_heap_between_passes()
    hooks = {"on_substep_end", "on_step_end"}
    assert callback is not None
    assert all(
        getattr(type(callback), h) is not getattr(type(callback).__mro__[1], h) for h in hooks
    )
