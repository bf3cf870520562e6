#!/bin/bash
wc -l < /app/records.lst > /app/output.txt
