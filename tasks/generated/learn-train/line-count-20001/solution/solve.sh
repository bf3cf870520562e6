#!/bin/bash
wc -l < /app/entries.dat > /app/count.txt
