#!/bin/bash
# Verifier (line-count, variant 30035): line count of /app/catalog.log: 24.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "24" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
