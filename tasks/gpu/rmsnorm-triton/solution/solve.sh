#!/bin/bash
# Reference solution: one Triton program per row reads the row once, keeps the sum of squares in
# float32, and writes x * rsqrt(mean + eps) * weight in the input's dtype: one pass over memory
# instead of PyTorch eager's chain of float32 temporaries. Rows wider than one block are walked
# in two loops (sum, then scale). APP_DIR moves /app for a run without a container.
set -euo pipefail
cd "${APP_DIR:-/app}/rmsnorm"
cat > rmsnorm.py <<'PY'
"""RMSNorm over the last dimension of a CUDA tensor, as one Triton kernel."""
import torch
import triton
import triton.language as tl


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, stride, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row, y_row = x_ptr + row * stride, y_ptr + row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        x = tl.load(x_row + offs, mask=offs < cols, other=0.0).to(tl.float32)
        acc += x * x
    scale = tl.rsqrt(tl.sum(acc, axis=0) / cols + eps)
    for start in range(0, cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < cols
        x = tl.load(x_row + offs, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + offs, (x * scale * w).to(y_ptr.dtype.element_ty), mask=mask)


def rmsnorm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    x = x.contiguous()
    weight = weight.contiguous()
    rows, cols = x.shape
    y = torch.empty_like(x)
    block = min(max(triton.next_power_of_2(cols), 16), 4096)
    warps = 8 if block >= 2048 else 4
    _rmsnorm_rows[(rows,)](x, weight, y, x.stride(0), cols, eps, BLOCK=block, num_warps=warps)
    return y
PY
