#!/bin/bash
grep -cx thunder /app/stock.dat > /app/figure.txt
