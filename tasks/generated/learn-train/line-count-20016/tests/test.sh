#!/bin/bash
# Verifier (line-count, variant 20016): line count of /app/items.txt: 12.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "12" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
