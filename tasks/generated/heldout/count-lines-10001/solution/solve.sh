#!/bin/bash
wc -l < /app/samples.dat > /app/final.txt
