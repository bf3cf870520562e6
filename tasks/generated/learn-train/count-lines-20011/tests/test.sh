#!/bin/bash
# Verifier (count-lines, variant 20011): line count of /app/ledger.txt: 30.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "30" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
