#!/bin/bash
# Verifier (line-count, variant 20032): line count of /app/visits.log: 23.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "23" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
