#!/bin/bash
# Verifier (config-value, variant 10001): value of region in /app/site.conf: rocket50.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "rocket50" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
