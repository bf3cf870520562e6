#!/bin/bash
wc -l < /app/values.dat > /app/total.txt
