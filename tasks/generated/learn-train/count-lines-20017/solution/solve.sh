#!/bin/bash
grep -cx copper /app/readings.log > /app/summary.txt
