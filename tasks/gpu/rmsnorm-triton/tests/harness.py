"""python3 harness.py MODULE: checks rmsnorm() from the Python file MODULE against the reference
on the GPU, times both, and prints one JSON line: {"cases": [...], "reference_ms": [...],
"agent_ms": [...], "timed_correct": bool}.

The inputs, the expected outputs and the timing functions (CUDA events, synchronize) are made or
bound before MODULE is imported. The timing still shares a process with MODULE's code, which is
why this task stays out of the seed pool: tests/check_rmsnorm.py runs this harness as an
unprivileged user so at least the reward is out of its reach.
"""
import importlib.util
import json
import sys

import torch

CASES = [  # (rows, columns, dtype): one element, odd widths, wide rows, a tall thin matrix
    (1, 1, torch.float32),
    (3, 7, torch.bfloat16),
    (64, 1000, torch.float16),
    (257, 4096, torch.bfloat16),
    (300, 8192, torch.float32),
    (4096, 2, torch.bfloat16),
    (33, 65536, torch.float16),
]
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 4e-3}
SIZE, REPEATS, EPS = (16384, 4096), 21, 1e-6


def reference(x, weight, eps):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def inputs(rows, cols, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(rows, cols, device="cuda", generator=gen) * 3 + 0.5
    w = torch.rand(cols, device="cuda", generator=gen) + 0.5
    return x.to(dtype), w.to(dtype)


def close(got, want):
    if not isinstance(got, torch.Tensor) or got.shape != want.shape or got.dtype != want.dtype:
        return False, f"got {type(got).__name__} {getattr(got, 'shape', '')}, want {want.shape}"
    tol = TOLERANCE[want.dtype]
    err = ((got.float() - want.float()).abs() - tol * (1 + want.float().abs())).max().item()
    return err <= 0, f"largest excess error {err:.3g}"


def main():
    Event, record, elapsed, sync = (
        torch.cuda.Event, torch.cuda.Event.record, torch.cuda.Event.elapsed_time,
        torch.cuda.synchronize,
    )
    cases = []
    for seed, (rows, cols, dtype) in enumerate(CASES, 1):
        x, w = inputs(rows, cols, dtype, seed)
        cases.append((f"{rows}x{cols} {str(dtype)[6:]}", x, w, reference(x, w, EPS)))
    big_x, big_w = inputs(*SIZE, torch.bfloat16, 99)
    big_want = reference(big_x, big_w, EPS)
    sync()

    def timed(fn):
        start, end = Event(enable_timing=True), Event(enable_timing=True)
        record(start)
        out = fn(big_x, big_w, EPS)
        record(end)
        sync()
        return elapsed(start, end), out

    spec = importlib.util.spec_from_file_location("rmsnorm_under_test", sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.rmsnorm
    results = []
    for label, x, w, want in cases:
        try:
            ok, why = close(agent(x, w, EPS), want)
        except Exception as exc:  # the agent's kernel failing is a failed case, not a crash
            ok, why = False, f"raised {type(exc).__name__}: {str(exc)[:200]}"
        results.append({"case": label, "passed": ok, "detail": why})
    report = {"cases": results, "reference_ms": [], "agent_ms": [], "timed_correct": False}
    if all(r["passed"] for r in results):
        for _ in range(3):  # warm-up: compilation and caches stay out of the timings
            timed(agent), timed(reference)
        correct = True
        for rep in range(REPEATS):
            pair = [("agent_ms", agent), ("reference_ms", reference)]
            for key, fn in pair if rep % 2 else pair[::-1]:
                ms, out = timed(fn)
                report[key].append(ms)
                if key == "agent_ms":
                    correct = correct and close(out, big_want)[0]
        report["timed_correct"] = correct
    sys.stdout.write(json.dumps(report) + "\n")


main()
