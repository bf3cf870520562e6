#!/bin/bash
# Verifier: partial credit, 0.25 each for directory modes, private/ + bin/ file modes,
# other file modes, and leftovers removed with everything else intact.
# The agent's script runs as `nobody` (check_perms.py); /logs and /logs/verifier are made
# root-only first, so nothing it runs can write the reward or swap the folder.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_perms.py
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt
