"""Dedup (MinHash) of one very long instruction: peak memory and time, streamed vs all at once.

    .venv/bin/python benchmarks/bench_similarity.py [--mb 21] [--old-mb 2] [--json OUT]

Each measurement runs in a fresh process so its peak RSS is its own. "all at once" is the
previous implementation (every shingle into one `update_batch`: a shingles x 128 matrix); it is
measured on a smaller text (--old-mb) because at 21 MB it needs ~3 GB.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import time
from pathlib import Path

WORDS = [f"w{i}" for i in range(5000)]


def text_of(mb: float, seed: int = 0) -> str:
    rng = random.Random(seed)
    mean = sum(len(w) + 1 for w in WORDS) / len(WORDS)
    # One list of references to shared words: small next to the text it joins into.
    return " ".join(rng.choices(WORDS, k=int(mb * 1_000_000 / mean)))


def _child(mode: str, mb: float) -> dict[str, float]:
    text = text_of(mb)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    if mode == "streamed":
        from autoenvscaling.tools.tasks.similarity import DedupIndex

        DedupIndex().minhash(text)
    else:
        from datasketch import MinHash

        from autoenvscaling.tools.tasks.similarity import words

        tokens = words(text)
        shingles = {" ".join(tokens[i : i + 5]).encode() for i in range(len(tokens) - 4)}
        m = MinHash(num_perm=128, seed=1)
        m.update_batch(list(shingles))
    took = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "seconds": round(took, 2),
        "peak_mb": round(peak, 1),
        "peak_over_text_mb": round(peak - base, 1),
    }


def measure(mode: str, mb: float) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--mb", str(mb)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=21.0, help="instruction size (streamed)")
    parser.add_argument("--old-mb", type=float, default=2.0, help="instruction size (old way)")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=["streamed", "all-at-once"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.mb)))
        return
    rows = {
        f"streamed, {args.mb:g} MB": measure("streamed", args.mb),
        f"streamed, {args.old_mb:g} MB": measure("streamed", args.old_mb),
        f"all at once (before), {args.old_mb:g} MB": measure("all-at-once", args.old_mb),
    }
    from rich.console import Console
    from rich.table import Table

    table = Table("MinHash of one text", "seconds", "peak RSS MB", "over the text MB")
    for name, row in rows.items():
        table.add_row(name, f"{row['seconds']}", f"{row['peak_mb']}", f"{row['peak_over_text_mb']}")
    Console().print(table)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
