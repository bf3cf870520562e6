#!/bin/bash
wc -l < /app/visits.lst > /app/value.txt
