#!/bin/bash
wc -l < /app/stock.lst > /app/total.txt
