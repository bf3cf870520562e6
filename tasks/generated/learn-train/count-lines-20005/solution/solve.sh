#!/bin/bash
grep -cx rocket /app/records.dat > /app/figure.txt
