#!/bin/bash
# Verifier (binary): compare buildorder.py with a reference on the example and on generated
# graphs (large DAGs, target selection, cycles, unknown names).
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_buildorder.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
