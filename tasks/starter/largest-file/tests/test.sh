#!/bin/bash
# Verifier: /app/largest.txt names the largest file of /app/files (b.log).
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/largest.txt)" = "b.log" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
