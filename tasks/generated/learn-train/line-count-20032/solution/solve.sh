#!/bin/bash
wc -l < /app/visits.log > /app/value.txt
