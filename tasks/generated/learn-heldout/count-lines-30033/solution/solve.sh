#!/bin/bash
grep -cx garden /app/readings.dat > /app/tally.txt
