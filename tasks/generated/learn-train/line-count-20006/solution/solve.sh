#!/bin/bash
wc -l < /app/batch.dat > /app/figure.txt
