#!/bin/bash
# Reference solution: apply the fix (tab-indented recipe, -lm, consistent median prototype,
# a real double comparator, even-count median, population stddev, ignorable lines, 1-based
# line numbers, empty input), then build and smoke-test.
set -euo pipefail
cd /app/numstat
patch -p1 < /solution/fix.patch
make clean && make
printf '3\n1\n2.5\n2.2\n\n# c\n  7 \n' | build/numstat
