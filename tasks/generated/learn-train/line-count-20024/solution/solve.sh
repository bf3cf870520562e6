#!/bin/bash
wc -l < /app/readings.txt > /app/value.txt
