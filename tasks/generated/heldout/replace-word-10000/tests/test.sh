#!/bin/bash
# Verifier (replace-word, variant 10000): /app/batch.log with breeze replaced by thunder.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'rocket anchor lemon violet\nrocket forest rocket anchor willow\napple jungle silver cloud\nthunder harbor tiger candle cloud thunder\nharbor tiger candle cloud thunder\n' | cmp -s - /app/batch.log && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
