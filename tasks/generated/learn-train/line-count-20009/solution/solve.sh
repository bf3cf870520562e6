#!/bin/bash
wc -l < /app/metrics.log > /app/output.txt
