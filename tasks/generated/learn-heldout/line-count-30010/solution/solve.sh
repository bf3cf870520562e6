#!/bin/bash
wc -l < /app/scores.dat > /app/result.txt
