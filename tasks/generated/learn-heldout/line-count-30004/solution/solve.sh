#!/bin/bash
wc -l < /app/stock.log > /app/total.txt
