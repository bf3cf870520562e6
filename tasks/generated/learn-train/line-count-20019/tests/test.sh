#!/bin/bash
# Verifier (line-count, variant 20019): line count of /app/readings.txt: 16.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "16" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
