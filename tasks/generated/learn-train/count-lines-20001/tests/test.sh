#!/bin/bash
# Verifier (count-lines, variant 20001): line count of /app/ledger.log: 9.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/result.txt)" = "9" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
