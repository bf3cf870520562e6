#!/bin/bash
# Verifier: /app/unique.txt is the sorted distinct lines of /app/words.txt.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'apple\nfig\nkiwi\npear\n' | cmp -s - /app/unique.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
