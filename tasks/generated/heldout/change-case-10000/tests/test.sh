#!/bin/bash
# Verifier (change-case, variant 10000): /app/output.txt is /app/records.txt in lower case.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'pixel thunder meadow\nforest lantern harbor river\napple silver canyon\n' | cmp -s - /app/output.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
