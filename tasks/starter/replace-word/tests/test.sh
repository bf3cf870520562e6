#!/bin/bash
# Verifier: /app/app.conf has db.internal wherever it had localhost.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'host=db.internal\nport=5432\nreplica=db.internal\n' | cmp -s - /app/app.conf && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
