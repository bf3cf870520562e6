#!/bin/bash
wc -l < /app/readings.lst > /app/figure.txt
