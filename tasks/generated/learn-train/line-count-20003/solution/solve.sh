#!/bin/bash
wc -l < /app/metrics.txt > /app/tally.txt
