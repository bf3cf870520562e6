#!/bin/bash
wc -l < /app/values.dat > /app/value.txt
