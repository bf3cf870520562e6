#!/bin/bash
wc -l < /app/readings.lst > /app/summary.txt
