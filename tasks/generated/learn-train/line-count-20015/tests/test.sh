#!/bin/bash
# Verifier (line-count, variant 20015): line count of /app/notes.txt: 17.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "17" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
