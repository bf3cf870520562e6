#!/bin/bash
# Verifier (line-count, variant 20031): line count of /app/report.txt: 11.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "11" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
