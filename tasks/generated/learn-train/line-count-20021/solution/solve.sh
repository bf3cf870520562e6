#!/bin/bash
wc -l < /app/items.dat > /app/value.txt
