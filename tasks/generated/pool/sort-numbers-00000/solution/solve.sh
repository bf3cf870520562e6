#!/bin/bash
sort -n /app/events.log > /app/result.txt
