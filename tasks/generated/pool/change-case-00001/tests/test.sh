#!/bin/bash
# Verifier (change-case, variant 1): /app/figure.txt is /app/inventory.lst in lower case.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'forest glacier pixel\nmeadow willow meadow rocket\nthunder forest\n' | cmp -s - /app/figure.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
