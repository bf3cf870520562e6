#!/bin/bash
awk -F= '$1=="region" {print $2}' /app/site.conf > /app/summary.txt
