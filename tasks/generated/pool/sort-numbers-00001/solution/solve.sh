#!/bin/bash
sort -n /app/readings.log > /app/summary.txt
