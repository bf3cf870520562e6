#!/bin/bash
wc -l < /app/stock.dat > /app/tally.txt
