#!/bin/bash
# Verifier (count-lines, variant 20031): lines of /app/visits.log equal to cloud: 3.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "3" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
