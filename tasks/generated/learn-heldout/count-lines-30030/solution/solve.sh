#!/bin/bash
wc -l < /app/catalog.dat > /app/answer.txt
