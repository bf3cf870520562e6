#!/bin/bash
wc -l < /app/report.txt > /app/summary.txt
