#!/bin/bash
wc -l < /app/inventory.lst > /app/output.txt
