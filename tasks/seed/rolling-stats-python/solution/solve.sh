#!/bin/bash
# Reference solution: slide the window in O(1) per step with exact integer running sums of the
# readings and of their squares (Python ints never overflow or round), so a constant stretch has
# variance exactly 0 even at offsets near 1e9 where float sums of squares cancel badly; population
# variance (divide by the window); every full window, including the last; window > n gives none.
set -euo pipefail
cd /app/rolling
cat > rolling.py <<'PY'
"""Rolling statistics over a stream of integer sensor readings."""


def rolling_stats(values, window):
    """Mean and population standard deviation of every window of `window` readings."""
    n = len(values)
    if window < 1 or window > n:
        return [], []
    total = sum(values[:window])
    squares = sum(x * x for x in values[:window])
    scale = window * window
    means, stds = [total / window], [((window * squares - total * total) / scale) ** 0.5]
    for old, new in zip(values, values[window:]):
        total += new - old
        squares += new * new - old * old
        means.append(total / window)
        stds.append(((window * squares - total * total) / scale) ** 0.5)
    return means, stds
PY
python3 bench.py rolling.py 6 3 1
