#!/bin/bash
wc -l < /app/data.lst > /app/result.txt
