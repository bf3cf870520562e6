#!/bin/bash
wc -l < /app/scores.lst > /app/figure.txt
