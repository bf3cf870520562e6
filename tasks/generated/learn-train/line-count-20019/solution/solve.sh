#!/bin/bash
wc -l < /app/readings.txt > /app/total.txt
