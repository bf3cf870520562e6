#!/bin/bash
# Verifier (count-lines, variant 20025): lines of /app/samples.lst equal to anchor: 1.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/value.txt)" = "1" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
