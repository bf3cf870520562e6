#!/bin/bash
wc -l < /app/samples.txt > /app/summary.txt
