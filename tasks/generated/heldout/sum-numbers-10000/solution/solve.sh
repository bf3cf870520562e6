#!/bin/bash
tr , '\n' < /app/notes.dat | awk '{s+=$1} END {print s}' > /app/output.txt
