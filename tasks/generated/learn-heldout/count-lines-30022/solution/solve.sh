#!/bin/bash
wc -l < /app/orders.lst > /app/summary.txt
