#!/bin/bash
wc -l < /app/data.log > /app/value.txt
