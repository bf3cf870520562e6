#!/bin/bash
wc -l < /app/events.txt > /app/result.txt
