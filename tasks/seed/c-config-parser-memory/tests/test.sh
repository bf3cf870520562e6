#!/bin/bash
# Verifier (binary): build kvget with hardening flags, run it on generated configs (long lines,
# long section names, thousands of entries, duplicates, prefixes, blank values) and compare with
# a reference parser implementing the rules in instruction.md.
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_kvget.py && echo 1.0 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
