#!/bin/bash
# Verifier (sum-numbers, variant 10000): sum of /app/notes.dat (commas): 5094.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "5094" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
