#!/bin/bash
wc -l < /app/readings.dat > /app/value.txt
