#!/bin/bash
grep -cx ember /app/values.lst > /app/figure.txt
