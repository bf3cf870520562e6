#!/bin/bash
grep -cx maple /app/readings.txt > /app/summary.txt
