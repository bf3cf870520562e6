"""Give the freed heap back to the kernel between training passes (glibc's `malloc_trim`).

A CPU training step allocates and frees many tensors of a few MB (activations, the LM head's
tiles, generation's caches). glibc serves them from its heap and, because its mmap threshold
grows as large blocks are freed, keeps their pages resident after they are freed: the worker's
RSS ends up far above what is alive at any moment (one embedded-round step: 3.2 GB peak against
1.8 GB with every large block mmapped; benchmarks/RESULTS.md). A fixed `MALLOC_MMAP_THRESHOLD_`
returns them too, but maps and zeroes every large tensor again (1 MB: 39% fewer tokens a
second). `malloc_trim(0)` between passes returns the free pages in one call per pass instead.

AUTOENVSCALING_TRIM_HEAP=0 turns it off (benchmarks/bench_grpo_memory.py measures both).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable
from typing import Any


def heap_trimmer() -> Callable[[], None] | None:
    """`malloc_trim(0)` of this process's C library, or None where there is none (not glibc)
    or AUTOENVSCALING_TRIM_HEAP=0."""
    if os.environ.get("AUTOENVSCALING_TRIM_HEAP", "1") == "0":
        return None
    name = ctypes.util.find_library("c")
    try:
        trim = ctypes.CDLL(name).malloc_trim if name else None
    except (OSError, AttributeError):  # musl, macOS: no malloc_trim
        return None
    if trim is None:
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int

    def release() -> None:
        trim(0)  # 1 when memory was returned, 0 when there was none to return: both fine

    return release


def trim_heap_between_passes() -> Any | None:
    """A transformers `TrainerCallback` that trims the heap after every pass (each gradient
    accumulation micro-step and each optimizer step), or None where trimming is unavailable."""
    trim = heap_trimmer()
    if trim is None:
        return None
    from transformers import TrainerCallback  # workers only: the parent never imports torch

    class TrimHeap(TrainerCallback):
        def on_substep_end(self, args, state, control, **kwargs):
            trim()

        def on_step_end(self, args, state, control, **kwargs):
            trim()

    return TrimHeap()
