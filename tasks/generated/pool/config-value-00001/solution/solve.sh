#!/bin/bash
awk -F': ' '$1=="mode" {print $2}' /app/site.ini > /app/final.txt
