#!/bin/bash
# Verifier (count-lines, variant 30011): line count of /app/metrics.txt: 7.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "7" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
