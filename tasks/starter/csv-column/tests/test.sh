#!/bin/bash
# Verifier: /app/cities.txt lists the city column of /app/table.csv.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'Oslo\nLima\nPune\n' | cmp -s - /app/cities.txt && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
