#!/bin/bash
wc -l < /app/readings.txt > /app/output.txt
