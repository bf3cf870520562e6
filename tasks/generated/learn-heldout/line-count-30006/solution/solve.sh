#!/bin/bash
wc -l < /app/scores.dat > /app/figure.txt
