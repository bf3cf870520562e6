#!/bin/bash
wc -l < /app/events.dat > /app/count.txt
