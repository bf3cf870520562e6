#!/bin/bash
# Verifier (count-lines, variant 20015): lines of /app/report.lst equal to island: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
