#!/bin/bash
wc -l < /app/stock.log > /app/value.txt
