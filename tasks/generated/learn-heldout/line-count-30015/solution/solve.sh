#!/bin/bash
wc -l < /app/records.txt > /app/output.txt
