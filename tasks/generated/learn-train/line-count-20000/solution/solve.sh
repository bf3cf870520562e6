#!/bin/bash
wc -l < /app/entries.txt > /app/total.txt
