#!/bin/bash
# Verifier (line-count, variant 20003): line count of /app/metrics.txt: 20.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "20" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
