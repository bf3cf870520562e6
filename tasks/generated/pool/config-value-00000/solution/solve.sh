#!/bin/bash
awk -F': ' '$1=="retries" {print $2}' /app/app.ini > /app/tally.txt
