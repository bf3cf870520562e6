#!/bin/bash
wc -l < /app/visits.txt > /app/output.txt
