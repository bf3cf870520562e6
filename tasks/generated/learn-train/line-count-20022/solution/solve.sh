#!/bin/bash
wc -l < /app/events.txt > /app/final.txt
