#!/bin/bash
# Verifier (line-count, variant 20011): line count of /app/items.txt: 14.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "14" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
