#!/bin/bash
wc -l < /app/scores.dat > /app/total.txt
