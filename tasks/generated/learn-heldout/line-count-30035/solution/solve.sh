#!/bin/bash
wc -l < /app/catalog.log > /app/tally.txt
