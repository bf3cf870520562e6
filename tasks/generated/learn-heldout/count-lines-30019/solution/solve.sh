#!/bin/bash
grep -cx meadow /app/notes.dat > /app/summary.txt
