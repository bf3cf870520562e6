#!/bin/bash
# Verifier (binary): /app/hall.txt, as seats-tui writes it, has exactly the group's four seats
# booked and every seat sold to others unchanged.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_hall.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt
