#!/bin/bash
wc -l < /app/stock.lst > /app/tally.txt
