#!/bin/bash
# Verifier: partial credit, 0.2 per check in tests/check_migration.py (schema, user identities,
# user dates/admin flags, posts, enforced constraints).
set -u
mkdir -p /logs/verifier
echo 0.0 > /logs/verifier/reward.txt
python3 /tests/check_migration.py
cat /logs/verifier/reward.txt
