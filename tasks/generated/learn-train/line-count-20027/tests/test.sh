#!/bin/bash
# Verifier (line-count, variant 20027): line count of /app/events.txt: 13.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "13" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
