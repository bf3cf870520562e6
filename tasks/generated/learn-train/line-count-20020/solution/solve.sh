#!/bin/bash
wc -l < /app/report.dat > /app/total.txt
