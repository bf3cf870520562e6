#!/bin/bash
awk '{s+=$1} END {print s}' /app/stock.log > /app/tally.txt
