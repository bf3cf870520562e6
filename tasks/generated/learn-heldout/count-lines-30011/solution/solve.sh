#!/bin/bash
wc -l < /app/metrics.txt > /app/count.txt
