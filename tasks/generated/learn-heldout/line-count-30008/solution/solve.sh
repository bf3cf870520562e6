#!/bin/bash
wc -l < /app/items.lst > /app/output.txt
