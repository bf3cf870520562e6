#!/bin/bash
grep -cx meadow /app/catalog.dat > /app/answer.txt
