#!/bin/bash
wc -l < /app/values.lst > /app/final.txt
