#!/bin/bash
wc -l < /app/report.txt > /app/count.txt
