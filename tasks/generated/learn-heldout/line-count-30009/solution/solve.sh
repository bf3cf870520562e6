#!/bin/bash
wc -l < /app/records.dat > /app/total.txt
