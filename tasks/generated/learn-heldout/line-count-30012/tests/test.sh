#!/bin/bash
# Verifier (line-count, variant 30012): line count of /app/samples.lst: 7.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "7" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
