#!/bin/bash
wc -l < /app/records.txt > /app/total.txt
