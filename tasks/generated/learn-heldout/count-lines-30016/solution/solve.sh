#!/bin/bash
grep -cx canyon /app/values.dat > /app/result.txt
