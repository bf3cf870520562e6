#!/bin/bash
# Verifier (replace-word, variant 0): /app/readings.log with cloud replaced by maple.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'violet anchor marble maple\nember garden marble rocket\nthunder rocket apple\nmaple pixel marble meadow harbor\npixel marble meadow harbor\n' | cmp -s - /app/readings.log && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
