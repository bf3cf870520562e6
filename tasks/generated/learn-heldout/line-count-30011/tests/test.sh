#!/bin/bash
# Verifier (line-count, variant 30011): line count of /app/records.txt: 13.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/total.txt)" = "13" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
