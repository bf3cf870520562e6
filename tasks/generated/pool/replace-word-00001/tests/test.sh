#!/bin/bash
# Verifier (replace-word, variant 1): /app/items.log with maple replaced by garden.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'pixel apple\nrocket copper ember garden\nsilver pixel apple rocket willow garden\ngarden silver pixel apple rocket willow garden\nrocket tiger marble forest\n' | cmp -s - /app/items.log && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
