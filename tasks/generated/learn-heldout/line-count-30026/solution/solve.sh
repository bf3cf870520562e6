#!/bin/bash
wc -l < /app/orders.txt > /app/count.txt
