#!/bin/bash
# Verifier (change-case, variant 0): /app/final.txt is /app/queue.txt in upper case.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'GARDEN BREEZE\nTHUNDER STONE RIVER\nSTONE GARDEN THUNDER MARBLE\n' | cmp -s - /app/final.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
