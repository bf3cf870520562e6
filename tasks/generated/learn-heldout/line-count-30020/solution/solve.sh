#!/bin/bash
wc -l < /app/stock.lst > /app/output.txt
