#!/bin/bash
sort -nr /app/records.txt > /app/tally.txt
