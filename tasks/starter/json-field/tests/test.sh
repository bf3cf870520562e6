#!/bin/bash
# Verifier: /app/name.txt holds the name field of /app/user.json.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(cat /app/name.txt)" = "Ada Lovelace" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
