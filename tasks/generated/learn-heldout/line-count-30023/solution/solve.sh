#!/bin/bash
wc -l < /app/scores.lst > /app/tally.txt
