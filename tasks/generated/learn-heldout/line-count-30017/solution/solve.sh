#!/bin/bash
wc -l < /app/stock.log > /app/result.txt
