#!/bin/bash
wc -l < /app/data.txt > /app/figure.txt
