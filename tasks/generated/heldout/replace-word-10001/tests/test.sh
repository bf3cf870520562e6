#!/bin/bash
# Verifier (replace-word, variant 10001): /app/events.lst with thunder replaced by island.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
printf 'apple violet meadow island island\norbit river cloud ember\nmeadow tiger island candle\nstone river harbor marble marble\nisland apple violet meadow island island\n' | cmp -s - /app/events.lst && echo 1 > /logs/verifier/reward.txt
cat /logs/verifier/reward.txt
