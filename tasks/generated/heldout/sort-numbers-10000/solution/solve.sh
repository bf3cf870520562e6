#!/bin/bash
sort -n /app/entries.log > /app/tally.txt
