#!/bin/bash
wc -l < /app/values.txt > /app/tally.txt
