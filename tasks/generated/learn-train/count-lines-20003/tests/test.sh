#!/bin/bash
# Verifier (count-lines, variant 20003): line count of /app/queue.txt: 28.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "28" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
