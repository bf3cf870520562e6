#!/bin/bash
wc -l < /app/data.txt > /app/value.txt
