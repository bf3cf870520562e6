"""Prompt and generation speed of the embedded model under one llama-cpp-python build.

    .venv/bin/python benchmarks/bench_llama_cpu.py [--model GGUF] [--runs 5] [--json OUT]

Run it with the interpreter of the build to measure: the project's portable build (the
Makefile's LLAMA_CPU_ARGS: AVX2, no AVX-512, no AMX) is in .venv; a native build (GGML_NATIVE,
the build host's instruction sets) can be installed into a scratch venv for the comparison, e.g.

    python3.12 -m venv /tmp/native && CMAKE_ARGS="-DGGML_NATIVE=ON" \\
      /tmp/native/bin/pip install --no-cache-dir llama-cpp-python==0.3.36
    /tmp/native/bin/python benchmarks/bench_llama_cpu.py --model "$(.venv/bin/python -c \\
      'from autoenvscaling.training.serving.embedded_setup import ensure_embedded_assets as e; \\
       print(e(with_converter=False).model_path)')"

It loads the model in-process (no server, no HTTP: the library's own speed), evaluates a prompt
of `--prompt-tokens` tokens `--runs` times (prompt tokens/s, the KV cache cleared each time) and
generates `--gen-tokens` tokens greedily after it (generation tokens/s), and prints the median
of each with llama.cpp's system-info line, which says which instruction sets the build uses.
Only llama_cpp and the standard library: it runs in a bare venv.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path


def measure(model: Path, prompt_tokens: int, gen_tokens: int, runs: int, threads: int) -> dict:
    import llama_cpp

    llm = llama_cpp.Llama(
        model_path=str(model), n_ctx=4096, n_threads=threads, n_batch=512, verbose=False
    )
    text = "The quick brown fox jumps over the lazy dog. " * (prompt_tokens // 8)
    tokens = llm.tokenize(text.encode())[:prompt_tokens]
    prompt_rates, gen_rates = [], []
    for _ in range(runs):
        llm.reset()  # the next eval writes from position 0 again
        started = time.perf_counter()
        llm.eval(tokens)
        prompt_rates.append(len(tokens) / (time.perf_counter() - started))
        started = time.perf_counter()
        for _ in range(gen_tokens):  # one token at a time, as a served reply decodes
            llm.eval([llm.sample(temp=0.0)])
        gen_rates.append(gen_tokens / (time.perf_counter() - started))
    info = llama_cpp.llama_print_system_info()
    return {
        "system_info": (info.decode() if isinstance(info, bytes) else str(info)).strip(),
        "llama_cpp_python": llama_cpp.__version__,
        "threads": threads,
        "prompt_tokens": len(tokens),
        "gen_tokens": gen_tokens,
        "runs": runs,
        "prompt_tok_s": round(statistics.median(prompt_rates), 1),
        "gen_tok_s": round(statistics.median(gen_rates), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="GGUF model (default: embedded)")
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--gen-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    model = args.model
    if model is None:
        from autoenvscaling.training.serving.embedded_setup import ensure_embedded_assets

        model = ensure_embedded_assets(with_converter=False).model_path
    result = measure(model, args.prompt_tokens, args.gen_tokens, args.runs, args.threads)
    print(
        f"prompt {result['prompt_tok_s']} tok/s, generation {result['gen_tok_s']} tok/s "
        f"({result['threads']} threads) | {result['system_info']}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
