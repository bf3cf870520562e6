#!/bin/bash
wc -l < /app/batch.txt > /app/figure.txt
