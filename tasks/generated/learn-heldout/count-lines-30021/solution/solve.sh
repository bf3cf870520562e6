#!/bin/bash
wc -l < /app/values.txt > /app/count.txt
