#!/bin/bash
grep -cx thunder /app/report.txt > /app/total.txt
