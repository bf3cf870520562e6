#!/bin/bash
grep -cx copper /app/stock.txt > /app/final.txt
