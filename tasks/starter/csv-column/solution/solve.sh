#!/bin/bash
tail -n +2 /app/table.csv | cut -d, -f2 > /app/cities.txt
