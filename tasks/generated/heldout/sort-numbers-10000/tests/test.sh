#!/bin/bash
# Verifier (sort-numbers, variant 10000): /app/tally.txt is /app/entries.log sorted smallest first.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf '201\n263\n341\n358\n375\n' | cmp -s - /app/tally.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
