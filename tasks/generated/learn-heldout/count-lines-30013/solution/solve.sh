#!/bin/bash
wc -l < /app/scores.lst > /app/final.txt
