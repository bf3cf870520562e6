#!/bin/bash
wc -l < /app/inventory.lst > /app/tally.txt
