#!/bin/bash
# Verifier (count-lines, variant 30027): line count of /app/entries.lst: 28.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "28" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
