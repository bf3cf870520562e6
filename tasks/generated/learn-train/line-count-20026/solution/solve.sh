#!/bin/bash
wc -l < /app/metrics.dat > /app/final.txt
