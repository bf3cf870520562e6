#!/bin/bash
tr , '\n' < /app/queue.log | awk '{s+=$1} END {print s}' > /app/final.txt
