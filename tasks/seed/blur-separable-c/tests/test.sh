#!/bin/bash
# Verifier (binary): /app/blur/blur.c must match the reference 2-D gather on odd images and be at
# least 3x faster than it on a 1200x1000 image, radius 8 (tests/check_blur.py). The agent's code
# runs as `nobody`; /logs and /logs/verifier are made root-only first, so nothing it runs can
# write the reward.
set -u
mkdir -p /logs/verifier
chmod 755 /logs /logs/verifier
rm -f /logs/verifier/reward.json
echo 0.0 > /logs/verifier/reward.txt
python3 -I /tests/check_blur.py && echo 1.0 > /logs/verifier/reward.txt
rm -f /logs/verifier/reward.json
cat /logs/verifier/reward.txt
