#!/bin/bash
# Verifier (count-lines, variant 20022): line count of /app/visits.txt: 11.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/output.txt)" = "11" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
