#!/bin/bash
# Verifier (config-value, variant 10000): value of color in /app/service.cfg: island32.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/summary.txt)" = "island32" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
