#!/bin/bash
wc -l < /app/orders.dat > /app/value.txt
