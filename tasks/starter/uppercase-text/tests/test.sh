#!/bin/bash
# Verifier: /app/out.txt is /app/in.txt in upper case.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'HELLO WORLD\nSMALL MODELS LEARN\n' | cmp -s - /app/out.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
