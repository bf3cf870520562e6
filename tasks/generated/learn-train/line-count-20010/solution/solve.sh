#!/bin/bash
wc -l < /app/data.lst > /app/value.txt
