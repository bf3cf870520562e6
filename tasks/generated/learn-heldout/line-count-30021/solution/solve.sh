#!/bin/bash
wc -l < /app/readings.dat > /app/output.txt
