#!/bin/bash
# Verifier (binary): compare buildorder.py with a reference on the example and on generated
# graphs (large DAGs, target selection, cycles, unknown names).
# The agent's tool runs as `nobody` (check_buildorder.py); /logs and /logs/verifier are made
# root-only first, so nothing it runs can write the reward or swap the folder.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_buildorder.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt
