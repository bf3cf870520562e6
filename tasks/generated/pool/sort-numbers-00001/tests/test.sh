#!/bin/bash
# Verifier (sort-numbers, variant 1): /app/summary.txt is /app/readings.log sorted smallest first.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf '16\n18\n122\n125\n191\n232\n326\n382\n416\n423\n496\n' | cmp -s - /app/summary.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
