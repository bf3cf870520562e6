#!/bin/bash
grep -cx pixel /app/records.lst > /app/summary.txt
