#!/bin/bash
wc -l < /app/batch.lst > /app/final.txt
