#!/bin/bash
grep -cx lantern /app/stock.txt > /app/tally.txt
