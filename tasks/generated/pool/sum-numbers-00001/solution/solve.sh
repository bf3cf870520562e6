#!/bin/bash
tr , '\n' < /app/metrics.txt | awk '{s+=$1} END {print s}' > /app/output.txt
