#!/bin/bash
# Verifier (count-lines, variant 20023): lines of /app/ledger.dat equal to orbit: 2.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/count.txt)" = "2" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
