#!/bin/bash
wc -l < /app/inventory.dat > /app/final.txt
