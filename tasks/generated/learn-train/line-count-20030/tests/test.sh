#!/bin/bash
# Verifier (line-count, variant 20030): line count of /app/readings.txt: 23.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "23" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
