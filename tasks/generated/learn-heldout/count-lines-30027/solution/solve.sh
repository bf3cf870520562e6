#!/bin/bash
wc -l < /app/entries.lst > /app/output.txt
