#!/bin/bash
grep -cx violet /app/entries.txt > /app/final.txt
