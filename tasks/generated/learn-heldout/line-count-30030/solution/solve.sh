#!/bin/bash
wc -l < /app/orders.lst > /app/figure.txt
