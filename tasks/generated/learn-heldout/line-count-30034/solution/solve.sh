#!/bin/bash
wc -l < /app/readings.lst > /app/output.txt
