#!/bin/bash
# Reference solution: zero the counts first; drop NaN and values outside [edges[0], edges[bins]]
# with one test; find each value's bin by a branch-free binary search for the last edge <= v
# (O(log bins) instead of a scan), which puts a value equal to the last edge in the last bin.
set -euo pipefail
cd /app/hist
cat > histogram.c <<'C'
void histogram(long n, const double *values, int bins, const double *edges, long *counts)
{
    const double low = edges[0], high = edges[bins];
    for (int b = 0; b < bins; b++)
        counts[b] = 0;
    for (long i = 0; i < n; i++) {
        const double v = values[i];
        if (!(v >= low && v <= high)) /* also false for NaN */
            continue;
        const double *base = edges; /* invariant: base[0] <= v, answer in base[0 .. len-1] */
        long len = bins;
        while (len > 1) {
            long half = len / 2;
            base = base[half] <= v ? base + half : base;
            len -= half;
        }
        counts[base - edges]++;
    }
}
C
make -s clean bench
./bench 1000 4 1
