#!/bin/bash
wc -l < /app/orders.txt > /app/value.txt
