#!/bin/bash
# Verifier (line-count, variant 20010): line count of /app/data.lst: 9.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "9" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
