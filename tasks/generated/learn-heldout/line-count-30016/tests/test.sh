#!/bin/bash
# Verifier (line-count, variant 30016): line count of /app/visits.log: 16.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "16" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
