#!/bin/bash
# Verifier (line-count, variant 30025): line count of /app/catalog.log: 13.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
[ "$(tr -d ' \n' < /app/answer.txt)" = "13" ] && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
