#!/bin/bash
# Verifier (sort-numbers, variant 10001): /app/tally.txt is /app/records.txt sorted largest first.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf '470\n465\n433\n303\n294\n192\n136\n' | cmp -s - /app/tally.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
