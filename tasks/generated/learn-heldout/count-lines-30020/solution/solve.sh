#!/bin/bash
grep -cx candle /app/metrics.dat > /app/tally.txt
