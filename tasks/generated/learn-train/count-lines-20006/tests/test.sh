#!/bin/bash
# Verifier (count-lines, variant 20006): line count of /app/report.txt: 8.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "8" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
