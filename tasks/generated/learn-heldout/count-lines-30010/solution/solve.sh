#!/bin/bash
wc -l < /app/stock.dat > /app/total.txt
