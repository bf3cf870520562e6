"""TRL's adapter: the one module that touches a private part of TRL (tests/test_public_apis.py).

Bound the memory of TRL's fused LM head on CPU: score only the positions that have a label. TRL
has no public switch for it; `trl.trainer.utils._use_triton` decides, and tests/test_fused_head.py
fails when a TRL upgrade moves it or changes what it decides.

GRPOTrainer computes the completion's log-probabilities through TRL's chunked ("fused") LM head,
which never holds the whole (batch, sequence, vocabulary) logits. On CUDA it projects only the
positions whose label is not -100 (the completion tokens). On every other device, CPU included,
it projects *every* position of the batch, prompt and padding too (so that tile shapes stay fixed
for compilers such as Neuron's), in tiles of up to 4,096 positions x 32,768 vocabulary entries
in float32 (512 MiB), and its torch fallback keeps several tile-sized temporaries alive at once.
For the embedded round (4 rollouts of ~1,100 prompt + 256 completion tokens) that was ~4 GB of
the worker's peak whatever gradient checkpointing did, and a quarter of the backward's work spent
on prompt positions whose log-probabilities are thrown away (benchmarks/RESULTS.md).

`score_labelled_positions_only()` makes TRL take its CUDA path on CPU too: the same positions are
scored with the same arithmetic, the others are zero either way (TRL fills them with zeros), so
losses and gradients are unchanged; only the work and the tiles shrink to the completion tokens.
AUTOENVSCALING_COMPACT_LM_HEAD=0 keeps TRL's own CPU path (benchmarks/bench_grpo_memory.py
measures both side by side).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

_PATCHED = "_aes_compact_on_cpu"


def score_labelled_positions_only() -> bool:
    """Install the CPU path (idempotent). Returns False, changing nothing, when this TRL has no
    fused head to patch (tests/test_fused_head.py then fails loudly) or the switch is off."""
    if os.environ.get("AUTOENVSCALING_COMPACT_LM_HEAD", "1") == "0":
        return False
    try:
        import trl.trainer.utils as trl_utils
    except ImportError:
        return False
    decide: Callable[[Any], bool] | None = getattr(trl_utils, "_use_triton", None)
    if decide is None or not hasattr(trl_utils, "add_fused_lm_head"):
        return False
    if getattr(decide, _PATCHED, False):
        return True

    def compact(device: Any) -> bool:
        # Read only by add_fused_lm_head's "score only labelled positions?" test; the kernel
        # module keeps its own reference, so CPU still folds tiles with torch ops, not Triton.
        return device.type == "cpu" or decide(device)

    setattr(compact, _PATCHED, True)
    # the switch TRL reads is private: this module exists to flip it (tests/test_fused_head.py)
    trl_utils._use_triton = compact  # pyright: ignore[reportPrivateImportUsage]
    return True
