#!/bin/bash
wc -l < /app/metrics.lst > /app/final.txt
