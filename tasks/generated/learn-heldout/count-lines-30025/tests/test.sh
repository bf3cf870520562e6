#!/bin/bash
# Verifier (count-lines, variant 30025): lines of /app/entries.log equal to falcon: 2.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "2" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
