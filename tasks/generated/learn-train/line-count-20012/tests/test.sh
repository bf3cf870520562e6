#!/bin/bash
# Verifier (line-count, variant 20012): line count of /app/notes.txt: 10.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/figure.txt)" = "10" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
