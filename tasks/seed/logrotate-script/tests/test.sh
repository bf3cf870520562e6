#!/bin/bash
# Verifier (binary): build scenarios in temp dirs, run /app/rotate.sh, check every file.
# The agent's script runs as `nobody` (check_rotate.py); /logs and /logs/verifier are made
# root-only first, so nothing it runs can write the reward or swap the folder.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_rotate.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt
