#!/bin/bash
# Verifier: partial credit, 0.25 each for directory modes, private/ + bin/ file modes,
# other file modes, and leftovers removed with everything else intact.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_perms.py
cat /logs/verifier/reward.txt
