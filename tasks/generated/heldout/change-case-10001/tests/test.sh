#!/bin/bash
# Verifier (change-case, variant 10001): /app/output.txt is /app/queue.dat in upper case.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'ROCKET CLOUD CANYON ORBIT\nGARDEN MAPLE TIGER\nBREEZE EMBER LEMON\n' | cmp -s - /app/output.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
