#!/bin/bash
# Verifier (count-lines, variant 30019): lines of /app/notes.dat equal to meadow: 3.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "3" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
