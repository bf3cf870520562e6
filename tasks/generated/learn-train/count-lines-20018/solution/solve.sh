#!/bin/bash
wc -l < /app/inventory.log > /app/summary.txt
