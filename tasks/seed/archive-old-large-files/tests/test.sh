#!/bin/bash
# Verifier (binary): the selected files (derived from a regenerated reference tree) are in
# /app/archive with content and mtime, the rest is untouched, empty dirs gone, manifest exact.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_archive.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
