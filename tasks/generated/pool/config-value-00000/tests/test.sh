#!/bin/bash
# Verifier (config-value, variant 0): value of retries in /app/app.ini: ember35.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/tally.txt)" = "ember35" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
