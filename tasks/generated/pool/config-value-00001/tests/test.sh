#!/bin/bash
# Verifier (config-value, variant 1): value of mode in /app/site.ini: thunder68.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/final.txt)" = "thunder68" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
